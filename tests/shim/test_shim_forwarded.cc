// The NCCL functions libnccl-car.so does not hook are forwarded (shim/exports/forwarders.cc): each
// must reach the real NCCL once, with the caller's arguments, and give the caller exactly
// the real NCCL's result, whichever way the library was loaded. Which functions those are
// is read from the built files: the weak exports of libnccl-car.so (forwarders that no hook
// replaced), and of the stand-in (the ones it records generically).
#include <catch2/catch.hpp>
#include <nccl.h>

#include "call_checks.h"
#include "elf_symbols.h"
#include "route_runs.h"

using namespace shimtest;

namespace {

// The forwarded functions that the stand-in implements by hand, with real effects: the
// "nonhooked" scenario of shim_driver calls them (test_shim_routes.cc, every route).
const std::set<std::string> kInNonhookedScenario = {
    "ncclGetVersion",   "ncclGetUniqueId", "ncclBroadcast",        "ncclReduce",       "ncclAllGather",
    "ncclReduceScatter", "ncclSend",       "ncclRecv",             "ncclCommCount",    "ncclCommCuDevice",
    "ncclCommUserRank", "ncclGetLastError", "ncclGetErrorString",  "ncclCommGetAsyncError"};

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
      if (names[i] != "ncclResetDebugInit") CHECK(output.get("result") == std::to_string(40 + i));  // else void
    }
    CHECK(carLines(run.err, "WARN").empty());
  }
}

TEST_CASE("forwarded: a function the real NCCL lacks returns ncclInvalidUsage, and one WARN names it, through "
          "every route", "[shim][forwarded]") {
  const std::vector<std::string> names = forwardedOver(oldStandinLibrary()).absent;
  REQUIRE(names.size() >= 9);  // NCCL 2.12 lacks 9 of nccl.h 2.28's: memory, registration, more collectives
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
      if (name == "ncclResetDebugInit") continue;  // void: nothing to return
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
