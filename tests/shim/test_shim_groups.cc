// Communicators created and used inside ncclGroupStart/End: set up at the outer group end,
// all of the group's communicators together, never inside the group.
#include <catch2/catch.hpp>

#include "call_checks.h"

using namespace shimtest;

TEST_CASE("groups: communicators made in a group are set up after the caller's outer ncclGroupEnd",
          "[shim][groups]") {
  const ChildResult run = runDriver({"groups"}, {"NCCL_CAR_DEBUG=INFO"});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {"g1.end", "g2.end", "g3.end", "g4.end"});

  const Outputs outputs = parseOutputs(run.out);
  const std::string a = madeComms(outputs, "g1.init.a").at(0);
  const std::string b = madeComms(outputs, "g1.init.b").at(0);
  const std::string c = madeComms(outputs, "g2.init.c").at(0);
  const std::string d = madeComms(outputs, "g4.init.d").at(0);
  const std::string e = madeComms(outputs, "g3.init.e").at(0);
  CHECK(queriedComms(*findSegment(segments, "g1.end")) == std::set<std::string>{a, b});
  CHECK(queriedComms(*findSegment(segments, "g2.end")) == std::set<std::string>{c});
  CHECK(queriedComms(*findSegment(segments, "g3.end")) == std::set<std::string>{e});
  CHECK(queriedComms(*findSegment(segments, "g4.end")) == std::set<std::string>{d});

  // What each communicator forwarded, by reason: an all-reduce on a communicator not yet
  // set up (inside its group) counts as comm-not-ready.
  const std::string prefix = "taken 1shot=0 2shot=0 1stage=0 2stage=0 (0 bytes) forwarded ";
  const std::vector<std::pair<std::string, std::string>> expected = {
      {a, "1 (ineligible-comm=1)"}, {b, "0"}, {c, "0"}, {d, "1 (comm-not-ready=1)"}, {e, "1 (comm-not-ready=1)"}};
  for (const auto& [comm, summary] : expected) {
    INFO("comm " << comm << "\n" << run.err);
    CHECK(infoAbout(run.err, comm, "setup: not eligible:").size() == 1);
    CHECK(infoAbout(run.err, comm, "released:") == std::vector<std::string>{prefix + summary});
  }
}
