// The table of algorithms (kernels/algorithms.h): what the rows promise the code that reads
// them instead of naming kernels one by one.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "policy.h"
#include "stats.h"

using namespace car;

TEST_CASE("algorithm table: one row per kernel, each with its own name", "[algorithms]") {
  std::set<std::string> names;
  for (int a = 0; a < kAlgorithmCount; ++a) {
    const Algorithm algorithm = static_cast<Algorithm>(a);
    const AlgorithmSpec& row = specOf(algorithm);
    CAPTURE(row.name);
    CHECK(row.algorithm == algorithm);
    CHECK(std::string(algorithmName(algorithm)) == row.name);
    CHECK(names.insert(row.name).second);
    // "auto" is NCCL_CAR_ALGO's word for no kernel; "?" the name of none.
    CHECK(std::string(row.name) != "auto");
    CHECK(std::string(row.name) != "?");
    CHECK(isPush(algorithm) == (row.family == KernelFamily::Push));
  }
  CHECK(std::string(algorithmName(Algorithm::kCount)) == "?");
  // The names are part of the log format and of NCCL_CAR_ALGO: these never change.
  CHECK(std::string(algorithmName(Algorithm::OneStage)) == "1stage");
  CHECK(std::string(algorithmName(Algorithm::TwoStage)) == "2stage");
  CHECK(std::string(algorithmName(Algorithm::OneShotPush)) == "1shot");
  CHECK(std::string(algorithmName(Algorithm::TwoShotPush)) == "2shot");
}

TEST_CASE("algorithm table: a push kernel's area use covers the message and grows with it", "[algorithms]") {
  for (const AlgorithmSpec& row : kAlgorithms) {
    if (row.family != KernelFamily::Push) continue;
    CAPTURE(row.name);
    for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
      for (long long packs : {1LL, 7LL, 1000LL, 524288LL}) {
        CAPTURE(ranks, packs);
        const std::size_t use = row.areaUse(packs, ranks);
        CHECK(use >= static_cast<std::size_t>(packs) * kPackBytes);
        CHECK(row.areaUse(packs + 1, ranks) >= use);
      }
    }
  }
}

TEST_CASE("algorithm table: every kernel serves one collective, is counted by its name, and the all-reduce's "
          "can be forced", "[algorithms]") {
  const CommunicatorFacts two{2, true, 90};
  for (const AlgorithmSpec& row : kAlgorithms) {
    CAPTURE(row.name);
    const Collective collective = collectiveOf(row.algorithm);
    REQUIRE(collective != Collective::kCount);
    CHECK(serves(row.algorithm, collective));
    CHECK((static_cast<int>(row.algorithm) < kAllReduceAlgorithmCount) == (collective == Collective::AllReduce));
    CallStats stats;
    stats.countTaken(row.algorithm, 16);
    const std::string summary = stats.summary();
    CHECK(summary.find(std::string(" ") + row.name + "=1 ") != std::string::npos);
    // Every other kernel appears once, at 0.
    for (const AlgorithmSpec& other : kAlgorithms) {
      if (other.algorithm != row.algorithm) CHECK(summary.find(std::string(" ") + other.name + "=0") != std::string::npos);
    }
    Config config;
    config.algorithm = row.algorithm;
    if (collective != Collective::AllReduce) {
      // Its own collective's calls go to it; an all-reduce never does, forced or not.
      CallFacts call;
      call.collective = collective;
      call.type = ElementType::BFloat16;
      call.op = ReduceOp::Sum;
      call.count = 8;
      const CallPlan plan = planCall(two, call, Config{});
      CHECK(plan.ours);
      CHECK(plan.algorithm == row.algorithm);
      CHECK(chooseAlgorithm(two, 16, config, 1).algorithm != row.algorithm);
      continue;
    }
    CHECK(chooseAlgorithm(two, 16, config, 1).algorithm == row.algorithm);
    // Its buffers exist: forcing a pull kernel allocates the pull buffers.
    CHECK(pullKernelsReachable(config) == (row.family == KernelFamily::Pull));
  }
}
