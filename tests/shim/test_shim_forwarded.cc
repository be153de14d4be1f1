// The NCCL functions libnccl-car.so does not hook are forwarded (shim/exports/forwarders.cc): each
// must reach the real NCCL once, with the caller's arguments, and give the caller exactly
// the real NCCL's result, whichever way the library was loaded. Which functions those are
// is read from the built files: the weak exports of libnccl-car.so (forwarders that no hook
// replaced), and of the stand-in (the ones it records generically).
#include <catch2/catch.hpp>
#include <nccl.h>

#include <algorithm>
#include <type_traits>

#include "call_checks.h"
#include "elf_symbols.h"
#include "route_runs.h"

using namespace shimtest;

namespace {

// The forwarded functions that the stand-in implements by hand, with real effects: the
// "nonhooked" scenario of shim_driver calls them (test_shim_routes.cc, every route), and
// ncclAllGather and ncclReduceScatter too, which are hooks now but forward on a communicator
// we do not take.
const std::set<std::string> kInNonhookedScenario = {
    "ncclGetVersion",   "ncclGetUniqueId",  "ncclBroadcast",      "ncclReduce",     "ncclSend",
    "ncclRecv",         "ncclCommCount",    "ncclCommCuDevice",   "ncclCommUserRank", "ncclGetLastError",
    "ncclGetErrorString", "ncclCommGetAsyncError"};

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

// What the stand-in at `library` does with each function we forward (our weak exports:
// forwarders that no hook replaced).
struct ForwardedByStandin {
  std::vector<std::string> generic;  // recorded generically: the "forwarded" scenario calls them
  std::vector<std::string> absent;   // not in that NCCL at all (an older one)
};

ForwardedByStandin forwardedOver(const std::string& library) {
  const std::set<std::string> forwarded = readDynamicInfo(shimLibrary()).weak;
  const DynamicInfo standin = readDynamicInfo(library);
  ForwardedByStandin split;
  for (const std::string& name : forwarded) {
    // The pnccl* forwarders: test_shim_guest.cc's scenarios call them through every route.
    if (name.rfind("pnccl", 0) == 0) continue;
    INFO(name << " is forwarded: some scenario must call it");
    if (standin.weak.count(name) != 0) split.generic.push_back(name);
    else if (standin.exported.count(name) != 0) CHECK(kInNonhookedScenario.count(name) == 1);
    else split.absent.push_back(name);
  }
  return split;
}

// shim_handle_driver's "forwarded" scenario on `names`, through `route`: under LD_PRELOAD
// on a handle of the preloaded library itself (the driver dlopens its path), whose
// forwarders find the NCCL of `ncclFolder` by name.
ChildResult runForwarded(Route route, const std::vector<std::string>& names, const std::vector<std::string>& env,
                         const std::string& ncclFolder = "") {
  std::vector<std::string> args = {route == Route::Preload ? std::string(shimLibrary()) : "libnccl.so.2",
                                   "forwarded"};
  args.insert(args.end(), names.begin(), names.end());
  return runThrough(route, handleDriverProgram(), args, env, ncclFolder);
}

}  // namespace

TEST_CASE("forwarded: every function we do not hook reaches NCCL once, unchanged, and its result comes back "
          "unchanged, through every route", "[shim][forwarded]") {
  const std::vector<std::string> names = forwardedOver(standinLibrary()).generic;
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
  for (Route route : {Route::Preload, Route::Dropin, Route::Audit}) {
    INFO(routeName(route));
    const ChildResult run = runForwarded(route, names, env);
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

TEST_CASE("forwarded: a function the real NCCL lacks returns ncclInvalidUsage, and one WARN names it, through "
          "every route", "[shim][forwarded]") {
  std::vector<std::string> names = forwardedOver(oldStandinLibrary()).absent;
  REQUIRE(names.size() >= 9);  // NCCL 2.12 lacks 9 of nccl.h 2.28's: memory, registration, more collectives
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
  // Hooks of newer functions answer the same way before reaching for them.
  for (const char* hooked : {"ncclCommGrow", "ncclCommSuspend", "ncclAllReduceConfig"}) names.push_back(hooked);
#endif
  std::vector<std::string> twice = names;
  twice.insert(twice.end(), names.begin(), names.end());  // still one WARN each
  for (Route route : {Route::Preload, Route::Dropin, Route::Audit}) {
    INFO(routeName(route));
    const ChildResult run = runForwarded(route, twice, {}, folderOf(oldStandinLibrary()));
    INFO(run.out << run.err);
    REQUIRE(run.exitCode == 0);
    for (const std::string& name : names) {
      INFO(name);
      CHECK(linesWith(run.err, {"NCCL-CAR WARN", name + " is not in the real NCCL"}).size() == 1);
      for (const std::string& line : splitLines(run.log)) CHECK(line.rfind(name + " ", 0) != 0);  // never reached it
      if (returningNothing().count(name) != 0) continue;
      std::vector<std::string> results;
      for (const std::string& line : splitLines(run.out)) {
        if (line.rfind(name + " ", 0) == 0) results.push_back(line.substr(name.size() + 1));
      }
      REQUIRE(results.size() == 2);
      for (const std::string& result : results) {
        if (result.rfind("value=", 0) == 0) CHECK(result.find("is_not_available") != std::string::npos);  // a text
        else CHECK(result == "result=" + std::to_string(ncclInvalidUsage));
      }
    }
    CHECK(carLines(run.err, "WARN").size() == names.size());
  }
}
