// ncclAllGather and ncclReduceScatter are hooks: on a communicator we do not take (here a
// 1-rank one), every call of every kind reaches NCCL once, unchanged, and the summary at
// destroy counts each one, by its reason.
#include <catch2/catch.hpp>
#include <nccl.h>

#include "call_checks.h"

using namespace shimtest;

TEST_CASE("all-gather and reduce-scatter: every type, op, count and alignment is forwarded unchanged",
          "[shim][collectives]") {
  const ChildResult run = runDriver({"movers-matrix"}, {"NCCL_CAR_DEBUG=INFO"});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {"init"});
  std::size_t calls = 0;
  for (const Segment& segment : segments) {
    const std::string& name = segment.expected.name;
    calls += name == "ncclAllGather" || name == "ncclReduceScatter" ? 1 : 0;
  }
  const Outputs outputs = parseOutputs(run.out);
  REQUIRE(outputs.at("matrix").get("calls") == std::to_string(calls));
  REQUIRE(calls > 50);
  const std::string comm = madeComms(outputs, "init").at(0);
  CHECK(infoAbout(run.err, comm, "released:") ==
        std::vector<std::string>{"taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) "
                                 "forwarded " + std::to_string(calls) + " (ineligible-comm=" + std::to_string(calls) +
                                 ")"});
  CHECK(carLines(run.err, "WARN").empty());
}

TEST_CASE("all-gather and reduce-scatter: NCCL's result comes back unchanged", "[shim][collectives]") {
  for (const char* function : {"ncclAllGather", "ncclReduceScatter"}) {
    INFO(function);
    const ChildResult run =
        runDriver({"movers-matrix"}, {std::string("STANDIN_NCCL_RESULT_") + function + "=" + std::to_string(ncclInvalidArgument)});
    const Outputs outputs = parseOutputs(run.out);
    const std::string prefix = std::string(function) == "ncclAllGather" ? "ag." : "rs.";
    std::size_t seen = 0;
    for (const Segment& segment : checkSteps(run)) {
      if (segment.expected.name != function) continue;
      ++seen;
      CHECK(outputs.at(segment.label).get("result") == std::to_string(ncclInvalidArgument));
      CHECK(segment.label.rfind(prefix, 0) == 0);
    }
    CHECK(seen > 20);
  }
}
