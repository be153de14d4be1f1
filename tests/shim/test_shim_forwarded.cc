// The NCCL functions libnccl-car.so does not hook are the real library's own on every way in
// (docs/design.md, "Three ways in"): looked up on a program's NCCL handle, each is the real
// function, which gets the caller's arguments and gives back its result untouched; one the
// real NCCL lacks is missing, as it is without the library. Which functions those are is read
// from the built files: the ones the stand-in records generically (its weak exports) that the
// library does not export.
#include <catch2/catch.hpp>
#include <nccl.h>

#include <algorithm>
#include <type_traits>

#include "call_checks.h"
#include "elf_symbols.h"
#include "route_runs.h"

using namespace shimtest;

namespace {

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit, from nccl_api.def

// The functions that return nothing (void): the driver only reports that they returned.
std::set<std::string> returningNothing() {
  std::set<std::string> names;
#define CAR_NCCL_FUNCTION(ret, name, params, args) \
  if (std::is_void_v<ret>) names.insert(#name);
#include "exports/nccl_api.def"
#undef CAR_NCCL_FUNCTION
  return names;
}

// The functions of this suite's nccl.h, which the driver can call generically.
std::set<std::string> tableNames() {
  std::set<std::string> names;
#define CAR_NCCL_FUNCTION(ret, name, params, args) names.insert(#name);
#include "exports/nccl_api.def"
#undef CAR_NCCL_FUNCTION
  return names;
}

// The functions of the stand-in at `library` that it records generically and we do not hook,
// of those the driver knows (a newer stand-in has more).
std::vector<std::string> notHooked(const std::string& library) {
  const std::set<std::string> ours = readDynamicInfo(shimLibrary()).exported, known = tableNames();
  std::vector<std::string> names;
  for (const std::string& name : readDynamicInfo(library).weak) {
    if (known.count(name) != 0 && ours.count(name) == 0) names.push_back(name);
  }
  return names;
}

// shim_handle_driver's "forwarded" scenario on `names`, through `route`, on the handle of
// `library` (a name or a path), over the NCCL of `ncclFolder`.
ChildResult runForwarded(Route route, const std::string& library, const std::vector<std::string>& names,
                         const std::vector<std::string>& env, const std::string& ncclFolder = "") {
  std::vector<std::string> args = {library, "forwarded"};
  args.insert(args.end(), names.begin(), names.end());
  return runThrough(route, handleDriverProgram(), args, env, ncclFolder);
}

}  // namespace

TEST_CASE("forwarded: every function we do not hook is the real NCCL's own: found on the program's handle, it "
          "gets the caller's arguments once and its result comes back unchanged, through every way in",
          "[shim][forwarded]") {
  const std::vector<std::string> names = notHooked(standinLibrary());
  REQUIRE(names.size() >= 11);  // nccl.h 2.28: memory, registration, windows, operators, more collectives
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
  // The entry points NCCL 2.29 to 2.32 added that we do not hook (ncclCommGrow,
  // ncclCommSuspend and the all-reduce's, all-gather's and reduce-scatter's per-call config
  // forms are hooks: test_shim_newer_api.cc); a newer NCCL underneath must give each one its
  // own answer.
  if (standinVersionCode() >= NCCL_VERSION(2, 32, 0)) {
    for (const char* added :
         {"ncclBroadcastConfig",
          "ncclReduceConfig", "ncclAlltoAllConfig", "ncclGatherConfig", "ncclScatterConfig",
          "ncclCommGetUniqueId", "ncclCommResume", "ncclCommMemStats", "ncclParamBind",
          "ncclParamGetI8", "ncclParamGetU64", "ncclParamGetStr", "ncclParamGet", "ncclParamGetParameter",
          "ncclParamGetAllParameterKeys", "ncclParamDumpAll", "ncclPutSignal", "ncclSignal", "ncclWaitSignal",
          "ncclWinGetUserPtr", "ncclSetEncryption"}) {
      INFO(added);
      CHECK(std::count(names.begin(), names.end(), added) == 1);
    }
  }
#endif
  std::vector<std::string> env = {"NCCL_CAR_DEBUG=INFO"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    env.push_back("STANDIN_NCCL_RESULT_" + names[i] + "=" + std::to_string(40 + i));  // a result per function
  }
  const std::vector<std::pair<Route, std::string>> ways = {{Route::Dropin, "libnccl.so.2"},
                                                           {Route::Audit, "libnccl.so.2"},
                                                           {Route::Audit, standinLibrary()},
                                                           {Route::PreloadAndAudit, "libnccl.so.2"}};
  for (const auto& [route, library] : ways) {
    INFO(routeName(route) << ", " << library);
    const ChildResult run = runForwarded(route, library, names, env);
    checkSetupPlacement(checkSteps(run), {"init"});
    const Outputs outputs = parseOutputs(run.out);
    for (std::size_t i = 0; i < names.size(); ++i) {
      INFO(names[i]);
      const Call& output = outputs.at(names[i]);
      if (returningNothing().count(names[i]) == 0) CHECK(output.get("result") == std::to_string(40 + i));
    }
    CHECK(carLines(run.err, "WARN").empty());
  }
}

TEST_CASE("forwarded: a function the real NCCL lacks is missing through every way in, as it is without the "
          "library; a hook of one returns ncclInvalidUsage and one WARN names it", "[shim][forwarded]") {
  // Every function of this suite's nccl.h that NCCL 2.12 lacks and we do not hook.
  const std::set<std::string> old = readDynamicInfo(oldStandinLibrary()).exported;
  const std::set<std::string> ours = readDynamicInfo(shimLibrary()).exported;
  std::vector<std::string> absent;
  for (const std::string& name : tableNames()) {
    if (old.count(name) == 0 && ours.count(name) == 0) absent.push_back(name);
  }
  REQUIRE(absent.size() >= 9);  // NCCL 2.12 lacks 9 of nccl.h 2.28's: memory, registration, more collectives
  const std::string oldFolder = folderOf(oldStandinLibrary());
  ChildRun alone;
  alone.program = handleDriverProgram();
  alone.args = {"libnccl.so.2", "forwarded"};
  alone.args.insert(alone.args.end(), absent.begin(), absent.end());
  alone.env = {"LD_LIBRARY_PATH=" + oldFolder};
  alone.preload = false;
  const ChildResult expected = runChild(alone);
  REQUIRE(expected.exitCode == 3);
  for (const std::string& name : absent) CHECK(linesWith(expected.out, {name + " missing"}).size() == 1);
  for (Route route : {Route::Dropin, Route::Audit, Route::PreloadAndAudit}) {
    INFO(routeName(route));
    const ChildResult run = runForwarded(route, "libnccl.so.2", absent, {}, oldFolder);
    INFO(run.out << run.err);
    CHECK(run.exitCode == expected.exitCode);
    CHECK(run.out == expected.out);
    CHECK(carLines(run.err, "WARN").empty());
  }

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
  // Hooks of newer functions answer for themselves: ncclInvalidUsage, one WARN each, twice called.
  const std::vector<std::string> hooked = {"ncclCommGrow", "ncclCommSuspend", "ncclAllReduceConfig",
                                           "ncclCommGrow", "ncclCommSuspend", "ncclAllReduceConfig"};
  for (Route route : {Route::Dropin, Route::Audit}) {
    INFO(routeName(route));
    const ChildResult run = runForwarded(route, "libnccl.so.2", hooked, {}, oldFolder);
    INFO(run.out << run.err);
    REQUIRE(run.exitCode == 0);
    for (const std::string& name : {"ncclCommGrow", "ncclCommSuspend", "ncclAllReduceConfig"}) {
      INFO(name);
      CHECK(linesWith(run.err, {"NCCL-CAR WARN", name + " is not in the real NCCL"}).size() == 1);
      CHECK(linesWith(run.out, {name + " result=" + std::to_string(ncclInvalidUsage)}).size() == 2);
      for (const std::string& line : splitLines(run.log)) CHECK(line.rfind(name + " ", 0) != 0);  // never reached
    }
    CHECK(carLines(run.err, "WARN").size() == 3);
  }
#endif
}
