// The whole ABI of every NCCL release from 2.18 on, on every way in (docs/design.md, "Three
// ways in"). For each release listed in tests/abi/symbols/ (the functions its wheel's
// libnccl.so.2 exports), a stand-in libnccl.so.2 exports exactly those names
// (tests/abi/abi.cmake). Through LD_PRELOAD, a drop-in folder, LD_AUDIT (by name and by path)
// and both, every name must bind, in a program linked against it and on a dlopen handle: to
// our library where we hook it, to the release's own everywhere else. And the real NCCL
// where the build found one: every function it exports, on a handle.
#include <catch2/catch.hpp>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "call_checks.h"
#include "elf_symbols.h"
#include "route_runs.h"

using namespace shimtest;

namespace {

namespace fs = std::filesystem;

struct Release {
  std::string name;     // nvidia-nccl-cu12-2.28.9
  std::string list;     // its list of functions
  std::string library;  // its stand-in
  std::string probe;    // the program linked against it
  std::set<std::string> names;
};

std::set<std::string> namesIn(const std::string& list) {
  std::set<std::string> names;
  std::ifstream in(list);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') names.insert(line);
  }
  return names;
}

std::vector<Release> releases() {
  std::vector<Release> found;
  for (const auto& entry : fs::directory_iterator(CAR_ABI_SYMBOLS)) {
    if (entry.path().extension() != ".txt") continue;
    Release release;
    release.name = entry.path().stem().string();
    release.list = entry.path().string();
    const fs::path folder = fs::path(CAR_ABI_FOLDER) / release.name;
    release.library = (folder / "libnccl.so.2").string();
    release.probe = (folder / "linked_probe").string();
    release.names = namesIn(release.list);
    found.push_back(release);
  }
  std::sort(found.begin(), found.end(), [](const Release& a, const Release& b) { return a.name < b.name; });
  return found;
}

std::string realPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? resolved : path;
}

// A probe's "<name> <file>" lines.
std::map<std::string, std::string> bindings(const std::string& out) {
  std::map<std::string, std::string> bound;
  for (const std::string& line : splitLines(out)) {
    const std::size_t space = line.find(' ');
    if (space != std::string::npos) bound[line.substr(0, space)] = line.substr(space + 1);
  }
  return bound;
}

// Every name bound once: those in `ours` to our library, the rest to `library`.
void checkBound(const ChildResult& run, const std::set<std::string>& names, const std::string& library,
                const std::set<std::string>& ours) {
  INFO(run.err);
  REQUIRE(run.exitCode == 0);
  const std::map<std::string, std::string> bound = bindings(run.out);
  CHECK(bound.size() == names.size());
  const std::string shim = realPath(shimLibrary()), real = realPath(library);
  int wrong = 0;
  for (const std::string& name : names) {
    const auto it = bound.find(name);
    const std::string expected = ours.count(name) != 0 ? shim : real;
    if (it == bound.end() || it->second != expected) {
      ++wrong;
      UNSCOPED_INFO(name << " bound to " << (it == bound.end() ? "nothing" : it->second) << ", not " << expected);
    }
  }
  CHECK(wrong == 0);
}

std::set<std::string> ourHooksAmong(const std::set<std::string>& names) {
  std::set<std::string> ours;
  for (const std::string& hook : readDynamicInfo(shimLibrary()).exported) {
    if (names.count(hook) != 0) ours.insert(hook);
  }
  return ours;
}

// The handle probe on `library` (a name or a path) through `route`, over the NCCL of `folder`.
ChildResult probeHandle(Route route, const std::string& library, const std::string& list, const std::string& folder) {
  return runThrough(route, std::string(CAR_ABI_FOLDER) + "/abi_handle_probe", {library, list}, {}, folder);
}

}  // namespace

TEST_CASE("abi: the lists cover NCCL 2.18 to 2.32, a release per minor version, each naming its wheel and sha256",
          "[shim][abi]") {
  std::set<int> minors;
  const std::regex file(R"(nvidia-nccl-cu1[23]-2\.([0-9]+)\.[0-9]+(\.post[0-9]+)?)");
  const std::regex wheel(R"(# wheel nvidia_nccl_cu1[23]-\S+\.whl sha256 [0-9a-f]{64})");
  for (const Release& release : releases()) {
    INFO(release.list);
    std::smatch match;
    REQUIRE(std::regex_match(release.name, match, file));
    minors.insert(std::stoi(match[1]));
    std::ifstream in(release.list);
    std::string first, second;
    std::getline(in, first);
    std::getline(in, second);
    CHECK(std::regex_match(second, wheel));
    for (const char* name : {"ncclAllReduce", "ncclCommInitRank", "ncclGetVersion", "pncclAllReduce"}) {
      CHECK(release.names.count(name) == 1);
    }
  }
  for (int minor = 18; minor <= 32; ++minor) {
    INFO("NCCL 2." << minor);
    CHECK(minors.count(minor) == 1);
  }
}

TEST_CASE("abi: without the library, each release's probes bind every name to its stand-in", "[shim][abi]") {
  // The probes themselves can tell where a name binds.
  for (const Release& release : releases()) {
    INFO(release.name);
    ChildRun linked;
    linked.program = release.probe;
    linked.preload = false;
    checkBound(runChild(linked), release.names, release.library, {});
    ChildRun handle;
    handle.program = std::string(CAR_ABI_FOLDER) + "/abi_handle_probe";
    handle.args = {release.library, release.list};
    handle.preload = false;
    checkBound(runChild(handle), release.names, release.library, {});
  }
}

TEST_CASE("abi: every function of every NCCL release binds through every way in, in a linked program and on a "
          "dlopen handle: to our hooks where we have them, to the release's own everywhere else", "[shim][abi]") {
  const std::vector<Release> all = releases();
  REQUIRE(all.size() >= 15);
  for (const Release& release : all) {
    INFO(release.name);
    const std::string folder = folderOf(release.library);
    const std::set<std::string> ours = ourHooksAmong(release.names);
    REQUIRE(ours.count("ncclAllReduce") == 1);
    for (Route route : {Route::Preload, Route::Dropin, Route::Audit, Route::PreloadAndAudit}) {
      INFO("linked, " << routeName(route));
      checkBound(runThrough(route, release.probe, {}, {}, folder), release.names, release.library, ours);
    }
    for (const auto& [route, library] : std::vector<std::pair<Route, std::string>>{
             {Route::Dropin, "libnccl.so.2"},
             {Route::Audit, "libnccl.so.2"},
             {Route::Audit, release.library},
             {Route::PreloadAndAudit, "libnccl.so.2"}}) {
      INFO("dlopen(" << library << "), " << routeName(route));
      checkBound(probeHandle(route, library, release.list, folder), release.names, release.library, ours);
    }
    // LD_PRELOAD does not reach a handle: every name there is the release's.
    INFO("dlopen(libnccl.so.2), LD_PRELOAD");
    checkBound(probeHandle(Route::Preload, "libnccl.so.2", release.list, folder), release.names, release.library, {});
  }
}

TEST_CASE("abi: every function the real NCCL exports, where the build found one, binds on a dlopen handle through "
          "LD_AUDIT and the drop-in folder", "[shim][abi][realnccl]") {
  const std::string real = realNcclLibrary();
  if (real.empty()) {
    FAIL("no real libnccl.so.2 in this build: ctest runs this case only where the build found one");
  }
  const std::set<std::string> names = readDynamicInfo(real).exported;
  REQUIRE(names.count("ncclAllReduce") == 1);
  const fs::path list = fs::temp_directory_path() / ("car-abi-real-" + std::to_string(getpid()) + ".txt");
  {
    std::ofstream out(list);
    for (const std::string& name : names) out << name << '\n';
  }
  const std::set<std::string> ours = ourHooksAmong(names);
  for (const auto& [route, library] : std::vector<std::pair<Route, std::string>>{
           {Route::Dropin, "libnccl.so.2"},
           {Route::Audit, "libnccl.so.2"},
           {Route::Audit, real},
           {Route::PreloadAndAudit, "libnccl.so.2"}}) {
    INFO("dlopen(" << library << "), " << routeName(route) << ", " << names.size() << " names of " << real);
    checkBound(probeHandle(route, library, list.string(), folderOf(real)), names, real, ours);
  }
  fs::remove(list);
}
