#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace shimtest {
namespace {

namespace fs = std::filesystem;

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* fromEnvironment(const char* name, const char* built) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : built;
}

std::vector<std::string> environmentOf(const ChildRun& run, const fs::path& log) {
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=", "STANDIN_NCCL_LOG=" + log.string()};
  if (run.preload) env.push_back(std::string("LD_PRELOAD=") + shimLibrary());
  for (const char* name : {"TSAN_OPTIONS", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
  }
  // The run's own settings replace the defaults of the same name.
  for (const std::string& setting : run.env) {
    const std::string name = setting.substr(0, setting.find('=') + 1);
    for (std::string& existing : env) {
      if (existing.compare(0, name.size(), name) == 0) existing.clear();
    }
    env.push_back(setting);
  }
  env.erase(std::remove(env.begin(), env.end(), std::string()), env.end());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

// `built`, unless the environment variable `name` names another path.
const char* builtOr(const char* name, const char* built) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : built;
}

}  // namespace

const char* shimLibrary() { return builtOr("CAR_TEST_SHIM_LIBRARY", CAR_SHIM_LIBRARY); }
const char* auditLibrary() { return builtOr("CAR_TEST_AUDIT_LIBRARY", CAR_AUDIT_LIBRARY); }
std::string frontLibrary() {
  const std::string library = shimLibrary();
  return library.substr(0, library.rfind('/') + 1) + CAR_FRONT_FILE;
}

ChildResult runChild(const ChildRun& run) {
  const fs::path dir = makeTempDir("car-shim");
  const fs::path outPath = dir / "stdout", errPath = dir / "stderr", logPath = dir / "calls.log";

  std::vector<std::string> argv = {run.program};
  argv.insert(argv.end(), run.args.begin(), run.args.end());
  std::vector<std::string> env = environmentOf(run, logPath);
  std::vector<char*> argvPointers = pointers(argv), envPointers = pointers(env);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, run.program.c_str(), &actions, nullptr, argvPointers.data(),
                                  envPointers.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    fs::remove_all(dir);
    throw std::runtime_error("cannot start " + run.program);
  }

  ChildResult result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(run.timeoutSeconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      result.timedOut = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status)) result.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.out = readFile(outPath);
  result.err = readFile(errPath);
  result.log = readFile(logPath);
  fs::remove_all(dir);
  return result;
}

const char* standinLibrary() { return fromEnvironment("CAR_STANDIN_LIBRARY", CAR_STANDIN_LIBRARY); }

const char* standinHeader() { return fromEnvironment("CAR_STANDIN_NCCL_HEADER", CAR_NCCL_HEADER); }

int standinVersionCode() {
  const std::string text = readFile(standinHeader());
  const std::string define = "#define NCCL_VERSION_CODE ";
  const std::size_t at = text.find(define);
  if (at == std::string::npos) throw std::runtime_error(std::string(standinHeader()) + " has no NCCL_VERSION_CODE");
  return std::atoi(text.c_str() + at + define.size());
}

ChildResult runDriver(const std::vector<std::string>& args, const std::vector<std::string>& env, bool preload) {
  ChildRun run;
  run.args = args;
  // shim_driver links the stand-in of its own build (RUNPATH); this one may be another's.
  const std::string standin = standinLibrary();
  run.env = {"LD_LIBRARY_PATH=" + standin.substr(0, standin.rfind('/'))};
  run.env.insert(run.env.end(), env.begin(), env.end());
  run.preload = preload;
  return runChild(run);
}

std::string makeTempDir(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + pattern);
  return pattern;
}

}  // namespace shimtest
