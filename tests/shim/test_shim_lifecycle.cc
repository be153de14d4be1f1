// Every hooked way to create and end a communicator, through the shim to the stand-in.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <nccl.h>

#include "call_checks.h"

using namespace shimtest;

namespace {

// Steps of the lifecycle scenario after which (or before whose call) setup must happen.
// Not ar.c8: c8 is a nonblocking split's child, which NCCL hands out later from its own thread,
// so it is never ours (shim/exports/hooks.cc, adoptAndSchedule).
// ar.c4 too, though c4 is still being created then (its creation not waited for): the set-up
// point follows from the calls alone, never from a look at NCCL's state.
const std::set<std::string> kSetupSteps = {"init", "init.cfg", "init.scal", "initall", "split",
                                           "shrink", "ar.c3", "ar.c4"};

}  // namespace

TEST_CASE("lifecycle: each call reaches NCCL once, unchanged, and NCCL's answer comes back", "[shim][lifecycle]") {
  const ChildResult run = runDriver({"lifecycle"}, {"NCCL_CAR_DEBUG=INFO", "STANDIN_NCCL_DEVICE=3"});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, kSetupSteps);
  const Outputs outputs = parseOutputs(run.out);

  // Nonblocking creation reports ncclInProgress, exactly as NCCL answered.
  CHECK(outputs.at("init.nb").get("result") == std::to_string(ncclInProgress));
  CHECK(outputs.at("split.nb").get("result") == std::to_string(ncclInProgress));
  // NCCL_SPLIT_NOCOLOR: NCCL's NULL newcomm reaches the caller, and nothing is set up.
  CHECK(madeComms(outputs, "split.nocolor") == std::vector<std::string>{"0x0"});

  // c4 was not polled by the caller before its first all-reduce: that call is its set-up point
  // all the same, on every rank alike. The shim asks NCCL nothing about the communicator's
  // state first (NCCL answers the set-up's queries, or refuses them and the call alike).
  const Segment* first = findSegment(segments, "ar.c4");
  REQUIRE(first != nullptr);
  for (const Call& call : first->calls) CHECK(call.name != "ncclCommGetAsyncError");
  CHECK(std::any_of(first->calls.begin(), first->calls.end(),
                    [](const Call& call) { return call.name == "ncclCommCount"; }));
  const Segment* again = findSegment(segments, "ar.c4.again");
  REQUIRE(again != nullptr);
  CHECK(viewOf(*again).trafficCount() == 0);
}

TEST_CASE("lifecycle: every communicator says why it is not eligible, and what it forwarded",
          "[shim][lifecycle][log]") {
  const ChildResult run = runDriver({"lifecycle"}, {"NCCL_CAR_DEBUG=INFO", "STANDIN_NCCL_DEVICE=3"});
  REQUIRE(run.exitCode == 0);
  const Outputs outputs = parseOutputs(run.out);
  std::vector<std::string> comms;
  for (const char* step : {"init", "init.cfg", "init.nb", "init.nb2", "init.scal", "initall", "split", "shrink"}) {
    for (const std::string& comm : madeComms(outputs, step)) comms.push_back(comm);
  }
  REQUIRE(comms.size() == 9);
  // The nonblocking split's child is never adopted: one INFO says so, and it has neither a
  // setup: nor a released: line (its all-reduce went to NCCL, uncounted).
  const std::string c8 = madeComms(outputs, "split.nb").at(0);
  CHECK(infoAbout(run.err, c8, "setup:").empty());
  CHECK(infoAbout(run.err, c8, "released:").empty());
  CHECK(run.err.find("a nonblocking ncclCommSplit/ncclCommShrink child is not ours") != std::string::npos);
  const std::set<std::string> nonblocking = {madeComms(outputs, "init.nb").at(0), madeComms(outputs, "init.nb2").at(0)};
  const std::string c4 = madeComms(outputs, "init.nb2").at(0);
  for (const std::string& comm : comms) {
    INFO("comm " << comm << "\n" << run.err);
    const std::string reasons = onlyInfo(run.err, comm, "setup: not eligible:");
    CHECK_FALSE(reasons.empty());
    // One all-reduce each (c4: two), forwarded because the communicator is not eligible, or
    // (a nonblocking one's) because it was not set up yet; one summary each, also for c1,
    // which was finalized and then destroyed.
    const std::string forwarded = comm == c4 ? "forwarded 2 (ineligible-comm=1 comm-not-ready=1)"
                                  : nonblocking.count(comm) != 0 ? "forwarded 1 (comm-not-ready=1)"
                                                                 : "forwarded 1 (ineligible-comm=1)";
    CHECK(infoAbout(run.err, comm, "released:") ==
          std::vector<std::string>{"taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) " +
                                   forwarded});
  }
  // c1 is released by ncclCommFinalize (its summary comes before that of c2, aborted right
  // after), not by the ncclCommDestroy that comes last.
  const std::string c2 = madeComms(outputs, "init.cfg").at(0);
  const std::size_t c1Released = run.err.find("comm " + madeComms(outputs, "init").at(0) + " rank 0/1 released:");
  const std::size_t c2Released = run.err.find("comm " + c2 + " rank 0/1 released:");
  CHECK(c1Released < c2Released);
  CHECK(c2Released != std::string::npos);

  // A 1-rank communicator: its reason names the rank count, and the log line carries the
  // device NCCL reported for it.
  const std::string c1 = madeComms(outputs, "init").at(0);
  CHECK(infoAbout(run.err, c1, "setup: not eligible:").at(0).find("1 ranks") != std::string::npos);
  CHECK(linesWith(run.err, {"[3] NCCL-CAR INFO comm " + c1 + " rank 0/1 setup: not eligible: "}).size() == 1);
  CHECK(linesWith(run.err, {"[3] NCCL-CAR INFO comm " + c1 + " rank 0/1 released: "}).size() == 1);
}

TEST_CASE("lifecycle: a nonblocking config is set up lazily even when NCCL answers ncclSuccess at once",
          "[shim][lifecycle][nonblocking]") {
  // Never inside the creating call of a nonblocking communicator, whatever NCCL returned.
  const ChildResult run = runDriver({"lifecycle"}, {"STANDIN_NCCL_RESULT_ncclCommInitRankConfig=0"});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, kSetupSteps);
  CHECK(parseOutputs(run.out).at("init.nb").get("result") == "0");
}
