#include "route_runs.h"

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>

namespace shimtest {

const char* routeName(Route route) {
  switch (route) {
    case Route::Preload: return "LD_PRELOAD";
    case Route::Dropin: return "drop-in folder";
    case Route::Audit: return "LD_AUDIT";
    case Route::PreloadAndAudit: return "LD_PRELOAD and LD_AUDIT";
  }
  return "?";
}

std::string folderOf(const std::string& path) { return path.substr(0, path.rfind('/')); }

std::string standinCopy() {
  namespace fs = std::filesystem;
  struct Copy {
    fs::path folder;
    Copy() {
      folder = makeTempDir("car-standin-copy");
      fs::copy_file(standinLibrary(), folder / "libnccl.so.2");
    }
    ~Copy() {
      std::error_code ignored;
      fs::remove_all(folder, ignored);
    }
  };
  static const Copy copy;
  return (copy.folder / "libnccl.so.2").string();
}

std::string dropinFolderFor(const std::string& real) {
  namespace fs = std::filesystem;
  struct Folders {
    std::mutex mutex;
    std::map<std::string, fs::path> made;
    ~Folders() {
      std::error_code ignored;
      for (const auto& [real, folder] : made) fs::remove_all(folder, ignored);
    }
  };
  static Folders folders;
  std::lock_guard<std::mutex> lock(folders.mutex);
  auto it = folders.made.find(real);
  if (it != folders.made.end()) return it->second.string();
  const std::string pattern = makeTempDir("car-dropin");
  ChildRun make;
  make.program = pythonProgram();
  make.args = {toolProgram(), "dropin", "--lib", shimLibrary(), "--nccl-lib", real, pattern};
  make.preload = false;
  const ChildResult made = runChild(make);
  if (made.exitCode != 0) {
    std::error_code ignored;
    fs::remove_all(pattern, ignored);
    throw std::runtime_error("nccl-car dropin failed: " + made.out + made.err);
  }
  folders.made[real] = pattern;
  return pattern;
}

ChildResult runThrough(Route route, const std::string& program, const std::vector<std::string>& args,
                       const std::vector<std::string>& env, const std::string& ncclFolder) {
  const std::string nccl = ncclFolder.empty() ? folderOf(standinLibrary()) : ncclFolder;
  ChildRun run;
  run.program = program;
  run.args = args;
  run.preload = route == Route::Preload || route == Route::PreloadAndAudit;
  const std::string dropin = route == Route::Dropin ? dropinFolderFor(nccl + "/libnccl.so.2") + ":" : "";
  run.env = {"LD_LIBRARY_PATH=" + dropin + nccl};
  if (route == Route::Audit || route == Route::PreloadAndAudit) run.env.push_back(std::string("LD_AUDIT=") + auditLibrary());
  run.env.insert(run.env.end(), env.begin(), env.end());
  return runChild(run);
}

}  // namespace shimtest
