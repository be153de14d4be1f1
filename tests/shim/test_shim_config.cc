// Bad NCCL_CAR_* values: one WARN each, naming the variable and the default kept; the
// calls still reach NCCL unchanged. Also the log level's own effect, and the log file.
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "call_checks.h"
#include "route_runs.h"

using namespace shimtest;

namespace {

struct Bad {
  const char* variable;
  const char* value;
};

std::string setting(const Bad& bad) { return std::string(bad.variable) + "=" + bad.value; }

}  // namespace

TEST_CASE("config: each bad value warns once, names the variable, and keeps the default", "[shim][config]") {
  const Bad bad = GENERATE(values<Bad>({{"NCCL_CAR_MAX_BYTES", "12k"}, {"NCCL_CAR_MAX_BYTES", "100"},
                                        {"NCCL_CAR_MAX_BYTES", "-16"}, {"NCCL_CAR_MAX_BYTES", "0"},
                                        {"NCCL_CAR_ALGO", "3stage"}, {"NCCL_CAR_DEBUG", "LOUD"},
                                        {"NCCL_CAR_MAX_BLOCKS", "999"}, {"NCCL_CAR_MAX_BLOCKS", "0"},
                                        {"NCCL_CAR_DISABLE", "maybe"}, {"NCCL_CAR_NCCL_LIB", ""}}));
  INFO(setting(bad));
  const ChildResult run = runDriver({"allreduce-matrix", "rank1"}, {setting(bad)});
  const std::vector<Segment> segments = checkSteps(run);
  // Still at work (NCCL_CAR_DISABLE=maybe did not disable it): set up right after init.
  checkSetupPlacement(segments, {"init"});
  INFO(run.err);
  const std::vector<std::string> warnings = carLines(run.err, "WARN");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find(bad.variable) != std::string::npos);
  CHECK(warnings[0].find(std::string("'") + bad.value + "'") != std::string::npos);
  CHECK(warnings[0].find("using default") != std::string::npos);
  CHECK(carLines(run.err, "INFO").empty());  // the level stayed WARN
}

TEST_CASE("config: several bad values warn once each, and good ones still apply", "[shim][config]") {
  const ChildResult run = runDriver({"allreduce-matrix", "rank1"},
                                    {"NCCL_CAR_MAX_BYTES=12k", "NCCL_CAR_ALGO=3stage", "NCCL_CAR_DEBUG=LOUD",
                                     "NCCL_CAR_MAX_BLOCKS=999"});
  checkSetupPlacement(checkSteps(run), {"init"});
  INFO(run.err);
  CHECK(carLines(run.err, "WARN").size() == 4);
  for (const char* variable : {"NCCL_CAR_MAX_BYTES", "NCCL_CAR_ALGO", "NCCL_CAR_DEBUG", "NCCL_CAR_MAX_BLOCKS"}) {
    INFO(variable);
    CHECK(linesWith(run.err, {"NCCL-CAR WARN", variable, "using default"}).size() == 1);
  }

  const ChildResult mixed = runDriver({"allreduce-matrix", "rank1"}, {"NCCL_CAR_MAX_BLOCKS=999", "NCCL_CAR_DEBUG=info"});
  checkSetupPlacement(checkSteps(mixed), {"init"});
  INFO(mixed.err);
  CHECK(carLines(mixed.err, "WARN").size() == 1);
  CHECK(linesWith(mixed.err, {"NCCL-CAR INFO", "setup: not eligible: "}).size() == 1);
}

TEST_CASE("config: at WARN (the default) a healthy run prints nothing", "[shim][config]") {
  const ChildResult run = runDriver({"lifecycle"});
  REQUIRE(run.exitCode == 0);
  // Two-rank communicators warn on a machine without a usable GPU; nothing else may.
  for (const std::string& line : carLines(run.err, "WARN")) {
    INFO(line);
    CHECK(line.find("CUDA unusable for the set-up") != std::string::npos);
  }
  CHECK(carLines(run.err, "INFO").empty());
  CHECK(linesWith(run.err, {"NCCL-CAR"}).size() == carLines(run.err, "WARN").size());
}

TEST_CASE("config: on a machine without an NVIDIA driver the set-up's WARN says so, as nccl-car doctor does",
          "[shim][config][nodriver]") {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY);
  if (driver != nullptr) {
    dlclose(driver);
    FAIL("this machine has an NVIDIA driver: ctest runs this case only where none loads "
         "(tests/shim/run-without-driver.sh)");
  }
  const ChildResult run = runDriver({"lifecycle"});
  REQUIRE(run.exitCode == 0);
  const std::vector<std::string> warnings = carLines(run.err, "WARN");
  REQUIRE_FALSE(warnings.empty());  // the two-rank communicators
  for (const std::string& line : warnings) {
    INFO(line);
    CHECK(line.find("CUDA unusable for the set-up: no NVIDIA driver on this machine (libcuda.so.1 not found)") !=
          std::string::npos);
  }
}

// The INFO line saying where the real NCCL was found is printed under NCCL_CAR_DEBUG=INFO
// (the settings, which set the level, are read before the real NCCL is looked for).
TEST_CASE("config: NCCL_CAR_DEBUG=INFO says where the real NCCL was found", "[shim][config]") {
  const ChildResult run = runDriver({"nonhooked"}, {"NCCL_CAR_DEBUG=INFO"});
  INFO(run.err);
  CHECK(linesWith(run.err, {"NCCL-CAR INFO", "real NCCL found as the next library"}).size() == 1);
}

namespace {

// Names of the files in `folder`.
std::vector<std::string> filesIn(const std::string& folder) {
  std::vector<std::string> names;
  if (DIR* dir = opendir(folder.c_str())) {
    while (const dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') names.push_back(entry->d_name);
    }
    closedir(dir);
  }
  return names;
}

std::string fileText(const std::string& path) {
  std::ifstream stream(path);
  return std::string(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("config: NCCL_CAR_DEBUG_FILE takes every line, with %h and %p expanded", "[shim][config]") {
  const std::string folder = makeTempDir("car-debug-file");
  const ChildResult run = runDriver(
      {"lifecycle"}, {"NCCL_CAR_DEBUG=INFO", std::string("NCCL_CAR_DEBUG_FILE=") + folder + "/car.%h.%p.log"});
  REQUIRE(run.exitCode == 0);
  INFO(run.err);
  CHECK(linesWith(run.err, {"NCCL-CAR"}).empty());

  const std::vector<std::string> files = filesIn(folder);
  REQUIRE(files.size() == 1);
  const std::string log = fileText(folder + "/" + files[0]);
  INFO(log);
  CHECK_FALSE(carLines(log, "INFO").empty());
  CHECK_FALSE(linesWith(log, {"NCCL-CAR INFO", "setup:"}).empty());
  // Every line starts "host:pid:": the file is named after the same host and pid.
  const std::string prefix = log.substr(0, log.find(':', log.find(':') + 1));
  const std::string host = prefix.substr(0, prefix.find(':'));
  const std::string pid = prefix.substr(prefix.find(':') + 1);
  CHECK(files[0] == "car." + host + "." + pid + ".log");
  std::remove((folder + "/" + files[0]).c_str());
  rmdir(folder.c_str());
}

TEST_CASE("config: a NCCL_CAR_DEBUG_FILE that cannot be opened WARNs once, and stderr keeps the lines",
          "[shim][config]") {
  const ChildResult run =
      runDriver({"lifecycle"}, {"NCCL_CAR_DEBUG=INFO", "NCCL_CAR_DEBUG_FILE=/nonexistent/car-%p.log"});
  REQUIRE(run.exitCode == 0);
  INFO(run.err);
  const std::vector<std::string> warnings = linesWith(run.err, {"NCCL-CAR WARN", "NCCL_CAR_DEBUG_FILE"});
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("cannot open '/nonexistent/car-") != std::string::npos);
  CHECK(warnings[0].find("logging to stderr") != std::string::npos);
  CHECK_FALSE(linesWith(run.err, {"NCCL-CAR INFO", "setup:"}).empty());
}

namespace {

// A file in a folder of its own, removed with the folder.
struct ScratchFile {
  std::string folder, path;
  explicit ScratchFile(const std::string& text) {
    folder = makeTempDir("car-config");
    path = folder + "/table";
    std::ofstream(path) << text;
  }
  ~ScratchFile() {
    std::remove(path.c_str());
    rmdir(folder.c_str());
  }
};

}  // namespace

TEST_CASE("config: NCCL_CAR_TABLE naming a missing, empty or malformed file is WARNed at the first call, without a "
          "set-up: what it takes, and that the built-in rule applies", "[shim][config][table]") {
  const ScratchFile empty(""), malformed("a table, this is not\n"),
      otherMachine("nccl-car choice table 2\nfingerprint 0123456789abcdef\nall-reduce 2 nvlink any 16 1024 1shot\n");
  for (const auto& [value, why] : std::vector<std::pair<std::string, std::string>>{
           {"/nonexistent/table", "cannot be read (No such file or directory)"},
           {empty.folder, "is not a file"},
           {empty.path, "is empty"},
           {malformed.path, "is not a choice table: line 1: not a choice table"}}) {
    INFO("NCCL_CAR_TABLE=" << value);
    const ChildResult run = runDriver({"nonhooked"}, {"NCCL_CAR_TABLE=" + value});
    checkSetupPlacement(checkSteps(run), {"init"});  // the calls still reach NCCL unchanged
    const std::vector<std::string> warnings = carLines(run.err, "WARN");
    INFO(run.err);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("NCCL_CAR_TABLE=" + value + " " + why) != std::string::npos);
    CHECK(warnings[0].find("it takes a table nccl-car tune wrote, or builtin; the built-in rule applies") !=
          std::string::npos);
  }
  // A table is a table, whichever machine it is for (that is known only at a set-up).
  for (const std::string& value : {std::string("builtin"), otherMachine.path}) {
    INFO("NCCL_CAR_TABLE=" << value);
    const ChildResult run = runDriver({"nonhooked"}, {"NCCL_CAR_TABLE=" + value});
    CHECK(carLines(run.err, "WARN").empty());
  }
}

TEST_CASE("config: NCCL_CAR_NCCL_LIB naming no file, or a file the library does not forward to, is WARNed with the "
          "NCCL it forwards to instead", "[shim][config][nccllib]") {
  const std::string standin = folderOf(standinLibrary()) + "/libnccl.so.2";
  const std::string missing = "NCCL_CAR_NCCL_LIB=/nonexistent/libnccl.so.2 is not a file: it takes the path of the "
                              "real libnccl.so.2; the real NCCL is the next library (RTLD_NEXT): ";
  const std::string unused = "NCCL_CAR_NCCL_LIB=" + standinCopy() + " is not used: the real NCCL is the next "
                             "library (RTLD_NEXT): ";
  for (const auto& [value, expected] : std::vector<std::pair<std::string, std::string>>{
           {"/nonexistent/libnccl.so.2", missing}, {standinCopy(), unused}}) {
    for (Route route : {Route::Preload, Route::Audit}) {
      INFO("NCCL_CAR_NCCL_LIB=" << value << ", " << routeName(route));
      const ChildResult run = runThrough(route, driverProgram(), {"nonhooked"}, {"NCCL_CAR_NCCL_LIB=" + value});
      INFO(run.err);
      checkSetupPlacement(checkSteps(run), {"init"});
      const std::vector<std::string> warnings = carLines(run.err, "WARN");
      if (route == Route::Audit && value == standinCopy()) {
        CHECK(warnings.empty());  // under LD_AUDIT it names the NCCL behind the front: the copy, used
        continue;
      }
      REQUIRE(warnings.size() == 1);
      CHECK(warnings[0].find(expected) != std::string::npos);
    }
  }
  CHECK(carLines(runDriver({"nonhooked"}, {std::string("NCCL_CAR_NCCL_LIB=") + standinLibrary()}).err, "WARN").empty());
}
