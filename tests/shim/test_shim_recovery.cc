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
  // The all-reduce went to NCCL at once, after one look at NCCL's state and nothing set up:
  // it reached NCCL before the other thread's call did.
  CHECK(outputs.at("ar").get("result") == "0");
  CHECK(outputs.at("watchdog").get("result") == "0");
  CHECK(linesWith(run.log, {function + " comm=" + comm + " result=0"}).size() == 1);
  int looks = 0;
  bool allReduced = false, released = false;
  for (const std::string& line : splitLines(run.log)) {
    const Call call = parseCall(line);
    if (call.name == "ncclCommGetAsyncError") {
      ++looks;
      CHECK_FALSE(allReduced);
    }
    if (call.name == "ncclAllReduce") {
      CHECK_FALSE(released);
      allReduced = true;
    }
    if (call.name == function) released = true;
    CHECK(call.name != "ncclCommCount");  // no set-up
  }
  CHECK(allReduced);
  CHECK(released);
  CHECK(looks == 1);
  CHECK(carLines(run.err, "WARN").empty());
}
