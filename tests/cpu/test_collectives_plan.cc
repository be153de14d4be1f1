// The call plan of the all-gather and the reduce-scatter (plugin/policy.h): what is taken, up
// to which size, on which kernel and grid; their limit is on the whole message (every rank's
// part), and the all-gather's bits travel split whatever the type.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "call_facts.h"
#include "policy.h"

using namespace car;
using car::testing::callOf;

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr Collective kMovers[] = {Collective::AllGather, Collective::ReduceScatter};

Algorithm kernelOf(Collective collective) {
  return collective == Collective::AllGather ? Algorithm::AllGatherPush : Algorithm::ReduceScatterPush;
}

std::size_t& limitOf(Collective collective, Config& config) {
  return collective == Collective::AllGather ? config.allGatherMaxBytes : config.reduceScatterMaxBytes;
}

}  // namespace

TEST_CASE("all-gather and reduce-scatter: taken up to their own limit on every rank's part together",
          "[policy][plan][collectives]") {
  for (Collective collective : kMovers) {
    for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
      for (int t = 0; t < kElementTypeCount; ++t) {
        const auto type = static_cast<ElementType>(t);
        const std::size_t size = static_cast<std::size_t>(elementBytes(type));
        const CommunicatorFacts comm{ranks, true, 90};
        Config config;
        const std::size_t limit = limitOf(collective, config);
        // The largest part whose `ranks` parts fit the limit, and one element more.
        const std::size_t largest = limit / size / static_cast<std::size_t>(ranks);
        CAPTURE(collectiveName(collective), ranks, elementTypeName(type), largest);
        for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{1001}, largest}) {
          const CallPlan plan = planCall(comm, callOf(collective, type, count), config);
          REQUIRE(plan.ours);
          CHECK(plan.algorithm == kernelOf(collective));
          CHECK(plan.bytes == count * size);
          CHECK(plan.packs == packsOf(static_cast<long long>(plan.bytes)));
        }
        const CallPlan above = planCall(comm, callOf(collective, type, largest + 1), config);
        CHECK_FALSE(above.ours);
        CHECK(above.reason == ForwardReason::TooLarge);
        // 0: never ours.
        limitOf(collective, config) = 0;
        const CallPlan off = planCall(comm, callOf(collective, type, 1), config);
        CHECK_FALSE(off.ours);
        CHECK(off.reason == ForwardReason::TooLarge);
      }
    }
  }
}

TEST_CASE("all-gather and reduce-scatter: each checked like the all-reduce where it applies",
          "[policy][plan][collectives]") {
  const CommunicatorFacts two{2, true, 90};
  for (Collective collective : kMovers) {
    CAPTURE(collectiveName(collective));
    CallFacts call = callOf(collective, ElementType::BFloat16, 64);
    // No op for the all-gather, whatever the caller passed; the reduce-scatter needs a built-in one.
    call.op.reset();
    CHECK(planCall(two, call, Config{}).ours == (collective == Collective::AllGather));
    if (collective == Collective::ReduceScatter) CHECK(planCall(two, call, Config{}).reason == ForwardReason::Op);
    call = callOf(collective, ElementType::BFloat16, 64);
    call.type.reset();
    CHECK(planCall(two, call, Config{}).reason == ForwardReason::Type);
    CHECK(planCall(two, callOf(collective, ElementType::BFloat16, 0), Config{}).reason == ForwardReason::Empty);
    // fp8 only where NCCL takes it: sm_90 and newer.
    CHECK(planCall({2, true, 80}, callOf(collective, ElementType::Float8E4M3, 64), Config{}).reason ==
          ForwardReason::Type);
    CHECK(planCall(two, callOf(collective, ElementType::Float8E4M3, 64), Config{}).ours);
    // World sizes no kernel of ours serves; the PCIe case without a measured table.
    CHECK(planCall({3, false, 90}, callOf(collective, ElementType::BFloat16, 64), Config{}).reason ==
          ForwardReason::Untuned);
    CHECK(planCall({1, true, 90}, callOf(collective, ElementType::BFloat16, 64), Config{}).reason ==
          ForwardReason::NotEligible);
    // NCCL asked for; NCCL_CAR_ALGO and a requested all-reduce kernel change nothing.
    call = callOf(collective, ElementType::BFloat16, 64);
    call.ncclRequested = true;
    CHECK(planCall(two, call, Config{}).reason == ForwardReason::Requested);
    call.ncclRequested = false;
    call.requestedAlgorithm = Algorithm::TwoStage;
    Config forced;
    forced.algorithm = Algorithm::OneStage;
    const CallPlan plan = planCall(two, call, forced);
    REQUIRE(plan.ours);
    CHECK(plan.algorithm == kernelOf(collective));
    // Symmetric windows are the all-reduce's setting.
    call = callOf(collective, ElementType::BFloat16, 64);
    call.symmetricBuffers = true;
    Config symmetric;
    symmetric.symmetricNcclBytes = MiB;
    CHECK(planCall(two, call, symmetric).ours);
  }
}

TEST_CASE("all-gather and reduce-scatter: every plan fits one receive area and the grid limits",
          "[policy][plan][collectives]") {
  std::size_t plansTaken = 0;
  std::vector<Config> configs(1);
  for (std::size_t pushMaxBytes : {std::size_t{0}, 64 * KiB, 8 * MiB}) {
    for (int maxBlocks : {1, 7, kMaxPushBlocks}) {
      Config config;
      config.pushMaxBytes = pushMaxBytes;
      config.maxBlocks = maxBlocks;
      config.allGatherMaxBytes = 64 * MiB;  // let the area be the limit
      config.reduceScatterMaxBytes = 64 * MiB;
      configs.push_back(config);
    }
  }
  for (const Config& config : configs) {
    const BlockLayout layout = layoutFor(pullBufferBytes(config), config.pushMaxBytes);
    for (Collective collective : kMovers) {
      for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
        for (ElementType type : {ElementType::BFloat16, ElementType::Float32, ElementType::Int8, ElementType::Float64}) {
          const std::size_t size = static_cast<std::size_t>(elementBytes(type));
          const int wire = wirePacksOf(kernelOf(collective), type);
          CHECK(wire == (collective == Collective::AllGather ? 2 : wirePacksPerPack(type)));
          std::vector<std::size_t> counts = {1, 7, 1001};
          for (std::size_t part = 4 * KiB; part <= 16 * MiB; part *= 2) {
            for (std::size_t near : {part - 16, part, part + 16}) counts.push_back(near / size);
          }
          for (std::size_t count : counts) {
            for (int maxCtas : {0, 3}) {
              CallFacts call = callOf(collective, type, count);
              call.maxBlocks = maxCtas;
              const CallPlan plan = planCall({ranks, true, 90}, call, config);
              const std::size_t use = oneShotAreaUse(packsOf(static_cast<long long>(count * size)), ranks) *
                                      static_cast<std::size_t>(wire);
              CAPTURE(collectiveName(collective), ranks, elementTypeName(type), count, config.pushMaxBytes,
                      config.maxBlocks, maxCtas);
              // Ours exactly where its ranks' parts fit one area and the collective's limit.
              Config settings = config;
              const bool withinLimit = count * size * static_cast<std::size_t>(ranks) <= limitOf(collective, settings);
              CHECK(plan.ours == (use <= layout.areaBytes && withinLimit));
              if (!plan.ours) {
                CHECK(plan.reason == ForwardReason::TooLarge);
                continue;
              }
              ++plansTaken;
              CHECK(plan.blocks >= 1);
              CHECK(plan.blocks <= std::min(config.maxBlocks, pushBlockLimit(wire)));
              if (maxCtas > 0) CHECK(plan.blocks <= maxCtas);
              CHECK(plan.threads >= 32);
              CHECK(plan.threads <= kThreadsPerBlock);
              CHECK(plan.threads % 32 == 0);
            }
          }
        }
      }
    }
  }
  CHECK(plansTaken > 1000);
}
