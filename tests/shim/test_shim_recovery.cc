// NCCL's recovery paths through the shim, where host logic is enough (the kernels' side
// runs in tests/e2e/recovery_e2e.cc on a GPU).
#include <catch2/catch.hpp>
#include <nccl.h>

#include "call_checks.h"

using namespace shimtest;

TEST_CASE("recovery: ending a communicator while its set-up waits stops the set-up, touches nothing freed",
          "[shim][recovery]") {
  const std::string function = GENERATE(as<std::string>{}, "ncclCommAbort", "ncclCommDestroy", "ncclCommFinalize");
  INFO(function);
  const ChildResult run = runDriver({"stop-in-setup", function},
                                    {"STANDIN_NCCL_ASYNC_POLLS=1000000000", "NCCL_CAR_DEBUG=INFO"});
  INFO(run.out << run.err);
  // Both calls returned, and nothing used the communicator after NCCL freed it (the
  // stand-in marks such calls dead=1).
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  REQUIRE(linesWith(run.out, {"done"}).size() == 1);
  CHECK(linesWith(run.log, {" dead=1"}).empty());
  const std::vector<Segment> segments = parseLog(run.log);
  const Outputs outputs = parseOutputs(run.out);
  // The watchdog's call reached NCCL once, unchanged, and its answer came back.
  CHECK(linesWith(run.log, {function + " comm=" + madeComms(outputs, "init").at(0) + " result=0"}).size() == 1);
  CHECK(outputs.at("watchdog").get("result") == "0");
  // The all-reduce was not forwarded to a communicator being freed: NCCL never saw it, the
  // caller got ncclInvalidUsage, and a WARN says why.
  const Segment* ar = findSegment(segments, "ar");
  REQUIRE(ar != nullptr);
  CHECK(outputs.at("ar").get("result") == std::to_string(ncclInvalidUsage));
  CHECK(linesWith(run.log, {"ncclAllReduce ", " result="}).empty());
  CHECK(linesWith(run.err, {"NCCL-CAR WARN", "an all-reduce while another thread"}).size() == 1);
  // Our set-up's polls all came before the watchdog's call reached NCCL.
  const std::vector<std::string> lines = splitLines(run.log);
  bool released = false;
  for (const std::string& line : lines) {
    const Call call = parseCall(line);
    if (call.name == function) released = true;
    if (released) CHECK(call.name != "ncclCommGetAsyncError");
  }
  CHECK(released);
}
