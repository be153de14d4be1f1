// Communicators created and used inside ncclGroupStart/End: set up at the outer group end,
// all of the group's communicators together, never inside the group; a nonblocking one at
// its first call outside a group.
#include <catch2/catch.hpp>

#include "call_checks.h"

using namespace shimtest;

TEST_CASE("groups: communicators made in a group are set up after the caller's outer ncclGroupEnd",
          "[shim][groups]") {
  const ChildResult run = runDriver({"groups"}, {"NCCL_CAR_DEBUG=INFO"});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {"g1.end", "g2.end", "g3.after.e", "g4.end", "g5.end"});

  const Outputs outputs = parseOutputs(run.out);
  const std::string a = madeComms(outputs, "g1.init.a").at(0);
  const std::string b = madeComms(outputs, "g1.init.b").at(0);
  const std::string c = madeComms(outputs, "g2.init.c").at(0);
  const std::string d = madeComms(outputs, "g4.init.d").at(0);
  const std::string e = madeComms(outputs, "g3.init.e").at(0);
  const std::string f = outputs.at("g5.end").get("filled");
  CHECK(outputs.at("g5.split.f").get("made") == "0x0");  // as NCCL: NULL inside the group
  CHECK(f != "0x0");
  CHECK(queriedComms(*findSegment(segments, "g1.end")) == std::set<std::string>{a, b});
  CHECK(queriedComms(*findSegment(segments, "g2.end")) == std::set<std::string>{c});
  CHECK(queriedComms(*findSegment(segments, "g3.after.e")) == std::set<std::string>{e});
  CHECK(queriedComms(*findSegment(segments, "g4.end")) == std::set<std::string>{d});
  CHECK(queriedComms(*findSegment(segments, "g5.end")) == std::set<std::string>{f});

  // What each communicator forwarded, by reason: an all-reduce on a communicator not yet
  // set up (inside its group, or the one that sets it up) counts as comm-not-ready.
  const std::string prefix = "taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded ";
  const std::vector<std::pair<std::string, std::string>> expected = {
      {a, "1 (ineligible-comm=1)"}, {b, "0"}, {c, "0"}, {d, "1 (comm-not-ready=1)"}, {e, "2 (comm-not-ready=2)"},
      {f, "1 (ineligible-comm=1)"}};
  for (const auto& [comm, summary] : expected) {
    INFO("comm " << comm << "\n" << run.err);
    CHECK(infoAbout(run.err, comm, "setup: not eligible:").size() == 1);
    CHECK(infoAbout(run.err, comm, "released:") == std::vector<std::string>{prefix + summary});
  }
}

TEST_CASE("groups: ncclGroupSimulateEnd ends the group for the shim as it does for NCCL", "[shim][groups]") {
  const ChildResult run = runDriver({"simulate"}, {"NCCL_CAR_DEBUG=INFO"});
  const std::vector<Segment> segments = checkSteps(run);
  // Had the simulated end left the shim inside a group, nothing after it would be set up.
  checkSetupPlacement(segments, {"s2.init", "s4.ar"});
  const Outputs outputs = parseOutputs(run.out);
  CHECK(outputs.at("s1.sim").get("result") == "0");
  CHECK(outputs.at("s1.sim").get("estimate") == std::to_string(1.0f));  // NCCL's answer reached the caller

  const std::string created = madeComms(outputs, "s1.init").at(0);
  INFO(run.err);
  CHECK(infoAbout(run.err, created, "setup: not eligible:") ==
        std::vector<std::string>{"created in a group ended by ncclGroupSimulateEnd"});
  CHECK(infoAbout(run.err, created, "released:") ==
        std::vector<std::string>{"taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded 1 (ineligible-comm=1)"});
  // The nonblocking communicator's all-reduce inside the simulated group ran nowhere: not
  // counted, its place given back. The one that set it up was not ready yet.
  CHECK(infoAbout(run.err, madeComms(outputs, "s3.init").at(0), "released:") ==
        std::vector<std::string>{"taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded 1 "
                                 "(comm-not-ready=1)"});
}
