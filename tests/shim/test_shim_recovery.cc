// NCCL's recovery paths through the shim, where host logic is enough (the kernels' side
// runs in tests/e2e/recovery_e2e.cc on a GPU).
#include <catch2/catch.hpp>
#include <nccl.h>

#include "call_checks.h"

using namespace shimtest;

TEST_CASE("recovery: a call on a communicator NCCL is still creating waits for nothing; ending it later is NCCL's",
          "[shim][recovery]") {
  // NCCL never finishes creating the communicator; the program calls all the same (NCCL
  // refuses such a call), and another thread ends the communicator 200 ms later.
  const std::string function = GENERATE(as<std::string>{}, "ncclCommAbort", "ncclCommDestroy", "ncclCommFinalize");
  INFO(function);
  const ChildResult run = runDriver({"stop-in-setup", function},
                                    {"STANDIN_NCCL_ASYNC_POLLS=1000000000", "NCCL_CAR_DEBUG=INFO"});
  INFO(run.out << run.err);
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  REQUIRE(linesWith(run.out, {"done"}).size() == 1);
  CHECK(linesWith(run.log, {" dead=1"}).empty());
  const Outputs outputs = parseOutputs(run.out);
  const std::string comm = madeComms(outputs, "init").at(0);
  // The all-reduce went to NCCL at once, after the set-up's queries (its set-up point follows
  // from the calls, not from NCCL's state; one rank: nothing more is set up), before the other
  // thread's call did; nothing of ours reached NCCL after that.
  CHECK(outputs.at("ar").get("result") == "0");
  CHECK(outputs.at("watchdog").get("result") == "0");
  CHECK(linesWith(run.log, {function + " comm=" + comm + " result=0"}).size() == 1);
  bool allReduced = false, released = false;
  for (const std::string& line : splitLines(run.log)) {
    const Call call = parseCall(line);
    if (call.name.empty()) continue;
    CHECK(call.name != "ncclCommGetAsyncError");  // no look at NCCL's state
    if (call.name == "ncclCommCount") CHECK_FALSE(allReduced);
    if (call.name == "ncclAllReduce") {
      CHECK_FALSE(released);
      allReduced = true;
    }
    if (call.name == function) released = true;
    if (released) CHECK(call.name == function);
  }
  CHECK(allReduced);
  CHECK(released);
  CHECK(carLines(run.err, "WARN").empty());
}
