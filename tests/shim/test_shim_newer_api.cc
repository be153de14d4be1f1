// The functions of NCCL 2.29 to 2.32 that the library hooks (ncclCommGrow, ncclCommSuspend,
// ncclAllReduceConfig, ncclAllGatherConfig, ncclReduceScatterConfig), through the shim to a
// stand-in of that NCCL. Over an older NCCL they
// answer ncclInvalidUsage with one WARN each (test_shim_forwarded.cc).
#include <catch2/catch.hpp>
#include <nccl.h>

#include "call_checks.h"

using namespace shimtest;

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
TEST_CASE("newer API: grown communicators are set up like a split's child; ncclAllReduceConfig reaches NCCL "
          "unchanged; a suspended communicator is NCCL's alone from then on", "[shim][newer-api]") {
  if (standinVersionCode() < NCCL_VERSION(2, 32, 0)) {
    SUCCEED("the stand-in is an older NCCL: test_shim_forwarded.cc checks these answer ncclInvalidUsage");
    return;
  }
  const ChildResult run = runDriver({"newer-api"}, {"NCCL_CAR_DEBUG=INFO"});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {"init", "grow", "grow.join"});
  const Outputs outputs = parseOutputs(run.out);
  CHECK(outputs.at("grow.nb").get("result") == std::to_string(ncclInProgress));
  const std::string c1 = madeComms(outputs, "init").at(0);
  const std::string existing = madeComms(outputs, "grow").at(0);
  const std::string joining = madeComms(outputs, "grow.join").at(0);
  const std::string nonblocking = madeComms(outputs, "grow.nb").at(0);
  const std::string unsaid = madeComms(outputs, "grow.default").at(0);
  CHECK(queriedComms(*findSegment(segments, "grow")) == std::set<std::string>{existing});
  CHECK(queriedComms(*findSegment(segments, "grow.join")) == std::set<std::string>{joining});
  // A nonblocking child, or one whose mode the config does not say, is never adopted: it has
  // neither a setup: nor a released: line, and an INFO says why for each.
  for (const std::string& comm : {nonblocking, unsaid}) {
    CHECK(infoAbout(run.err, comm, "setup:").empty());
    CHECK(infoAbout(run.err, comm, "released:").empty());
  }
  CHECK(linesWith(run.err, {"NCCL-CAR INFO", "ncclCommGrow whose config does not set blocking = 1"}).size() == 2);

  // c1's side is released at the suspend, before NCCL's call: its released: line counts the
  // three config calls before it (forwarded: no GPU here), and none after.
  const std::string prefix = "taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded ";
  CHECK(infoAbout(run.err, c1, "released:") == std::vector<std::string>{prefix + "3 (ineligible-comm=3)"});
  CHECK(linesWith(run.err, {"NCCL-CAR WARN", "ncclCommSuspend: our buffers are released"}).size() == 1);
  // Nothing of ours touches c1 once suspended: every later call on it is the caller's own.
  for (const char* label : {"ar.c1.suspended", "resume.c1", "ar.c1.resumed", "destroy.c1"}) {
    const Segment* segment = findSegment(segments, label);
    REQUIRE(segment != nullptr);
    CHECK(viewOf(*segment).trafficCount() == 0);
  }
  for (const char* label : {"arc.c1", "agc.c1", "rsc.c1", "suspend.c1", "resume.c1"}) {
    CHECK(outputs.at(label).get("result") == "0");
  }
}
#endif
