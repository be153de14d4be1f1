// When the real NCCL fails around a communicator's creation (the group that created it,
// or its nonblocking initialisation), the shim does not set it up, forwards its
// all-reduces, and says at INFO why the communicator is not eligible (docs/design.md,
// "When set-up happens").
#include <catch2/catch.hpp>
#include <nccl.h>

#include "call_checks.h"

using namespace shimtest;

namespace {

const char* kFailedGroupEnd = "STANDIN_NCCL_RESULT_ncclGroupEnd=5";
const char* kFailedAsyncQuery = "STANDIN_NCCL_RESULT_ncclCommGetAsyncError=6";

// The shim may still ask NCCL about the failure (ncclGetErrorString, ncclCommGetAsyncError),
// but sets nothing up: no ncclCommCount query, no handshake group, outside `setupSteps`.
void checkNothingSetUp(const std::vector<Segment>& segments, const std::set<std::string>& setupSteps) {
  for (const Segment& segment : segments) {
    if (setupSteps.count(segment.label) != 0) continue;
    const StepView view = viewOf(segment);
    for (const auto* list : {&view.before, &view.after}) {
      for (const Call* call : *list) {
        INFO("step " << segment.label << ": " << call->raw);
        CHECK((call->name == "ncclGetErrorString" || call->name == "ncclCommGetAsyncError"));
      }
    }
  }
}

}  // namespace

TEST_CASE("failures: communicators of a failed group are not set up", "[shim][failures]") {
  const ChildResult run = runDriver({"groups"}, {kFailedGroupEnd, "NCCL_CAR_DEBUG=INFO"});
  const std::vector<Segment> segments = checkSteps(run);
  // g1, g2 and g4 created communicators: after their failed ends, nothing is set up. (The
  // nonblocking communicator e, created outside them, is set up at its call after g3.)
  checkNothingSetUp(segments, {"g3.after.e"});
  const Outputs outputs = parseOutputs(run.out);
  CHECK(outputs.at("g1.end").get("result") == "5");
  // Its one all-reduce was in a group whose end failed too: NCCL ran nothing of it, and the
  // count is of the calls NCCL took.
  CHECK(infoAbout(run.err, madeComms(outputs, "g1.init.a").at(0), "released:") ==
        std::vector<std::string>{"taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded 0"});
}

TEST_CASE("failures: a nonblocking communicator's set-up point does not depend on NCCL's state", "[shim][failures]") {
  // NCCL cannot even say how the communicators are: the set-up points stay where the calls
  // put them (a look at NCCL's state could say otherwise on another rank).
  const ChildResult run = runDriver({"lifecycle"}, {kFailedAsyncQuery, "NCCL_CAR_DEBUG=INFO"});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {"init", "init.cfg", "init.scal", "initall", "split", "shrink", "ar.c3", "ar.c4"});
  for (const char* step : {"ar.c3", "ar.c4"}) {
    INFO(step);
    const StepView view = viewOf(*findSegment(segments, step));
    REQUIRE_FALSE(view.before.empty());
    CHECK(view.before.front()->name == "ncclCommUserRank");
  }
}

// Communicators of a failed group are never set up: each still says why at INFO.
TEST_CASE("failures: communicators of a failed group say why they are not eligible",
          "[shim][failures]") {
  const ChildResult run = runDriver({"groups"}, {kFailedGroupEnd, "NCCL_CAR_DEBUG=INFO"});
  const Outputs outputs = parseOutputs(run.out);
  INFO(run.err);
  for (const char* step : {"g1.init.a", "g1.init.b", "g2.init.c", "g4.init.d"}) {
    CHECK(infoAbout(run.err, madeComms(outputs, step).at(0), "setup: not eligible:").size() == 1);
  }
}

// Whatever NCCL answers about its state, every nonblocking communicator says why it is not
// eligible (here: one rank), once.
TEST_CASE("failures: a nonblocking communicator whose state cannot be read says why",
          "[shim][failures]") {
  const ChildResult run = runDriver({"lifecycle"}, {kFailedAsyncQuery, "NCCL_CAR_DEBUG=INFO"});
  const Outputs outputs = parseOutputs(run.out);
  INFO(run.err);
  for (const char* step : {"init.nb", "init.nb2"}) {
    CHECK(infoAbout(run.err, madeComms(outputs, step).at(0), "setup: not eligible:").size() == 1);
  }
}
