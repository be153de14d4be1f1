// Several threads at once, each creating, all-reducing on and destroying its own
// communicators through the shim. (Meant to run under ThreadSanitizer too.)
#include <catch2/catch.hpp>

#include <map>

#include "call_checks.h"

using namespace shimtest;

TEST_CASE("threads: concurrent life-cycles on separate communicators all complete", "[shim][threads]") {
  constexpr int kThreads = 8;
  constexpr int kIterations = 25;
  const ChildResult run = runDriver({"threads", std::to_string(kThreads), std::to_string(kIterations)},
                                    {"NCCL_CAR_DEBUG=INFO"});
  INFO(run.out << run.err.substr(0, 4000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  CHECK(linesWith(run.out, {"threads failures=0"}).size() == 1);
  CHECK(carLines(run.err, "WARN").empty());

  // Per thread, what NCCL saw from the caller (setup traffic aside) is the caller's own
  // sequence, each call on the communicator that thread's init produced.
  std::map<std::string, std::vector<Call>> byThread;
  for (const std::string& line : splitLines(run.log)) {
    const Call call = parseCall(line);
    CHECK(call.get("result") == "0");
    if (call.name == "ncclGetUniqueId" || call.name == "ncclCommInitRank" || call.name == "ncclAllReduce" ||
        call.name == "ncclCommDestroy") {
      byThread[call.get("tid")].push_back(call);
    } else {
      CHECK(isSetupTraffic(call));
    }
  }
  REQUIRE(byThread.size() == static_cast<std::size_t>(kThreads));
  const std::vector<std::string> cycle = {"ncclGetUniqueId", "ncclCommInitRank", "ncclAllReduce", "ncclAllReduce",
                                          "ncclAllReduce", "ncclCommDestroy"};
  std::set<std::string> comms;
  for (const auto& [tid, calls] : byThread) {
    INFO("thread " << tid);
    REQUIRE(calls.size() == cycle.size() * kIterations);
    std::string comm;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const std::size_t position = i % cycle.size();
      CHECK(calls[i].name == cycle[position]);
      if (position == 1) comms.insert(comm = calls[i].get("made"));
      if (position > 1) CHECK(calls[i].get("comm") == comm);
    }
  }
  // Every communicator was set up (found ineligible: 1 rank) and released once, having
  // forwarded its three all-reduces.
  CHECK(comms.size() == static_cast<std::size_t>(kThreads * kIterations));
  for (const std::string& comm : comms) {
    INFO("comm " << comm);
    CHECK(infoAbout(run.err, comm, "setup: not eligible:").size() == 1);
    CHECK(infoAbout(run.err, comm, "released:") ==
          std::vector<std::string>{"taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded 3 (ineligible-comm=3)"});
  }
}
