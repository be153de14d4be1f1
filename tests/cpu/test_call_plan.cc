// The call plan (plugin/policy.h): planCall is the one place that checks what the launch
// path then trusts, so every plan it makes must fit the buffers and the grid of its kernel,
// whatever the settings; and stagingFor says who copies a pull kernel's input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "call_facts.h"
#include "choice_table.h"
#include "policy.h"

using namespace car;
using car::testing::sumOf;

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

// The settings a plan must hold up under: the defaults, small and no push areas, pull
// buffers, each kernel forced, few blocks.
std::vector<Config> settingsToTry() {
  std::vector<Config> configs(1);
  Config config;
  config.pushMaxBytes = 64 * KiB;
  configs.push_back(config);
  config.pushMaxBytes = 0;
  configs.push_back(config);
  config = Config{};
  config.pushMaxBytes = config.maxBytes / 2;
  configs.push_back(config);
  for (const AlgorithmSpec& row : kAlgorithms) {
    if (!serves(row.algorithm, Collective::AllReduce)) continue;  // NCCL_CAR_ALGO's choices
    config = Config{};
    config.algorithm = row.algorithm;
    configs.push_back(config);
  }
  // A table measured over PCIe giving the push kernels every size (the PCIe case takes only
  // what a table gives it), with small areas, and with pull buffers (never used over PCIe).
  config = Config{};
  std::string rows = "nccl-car choice table 2\nfingerprint 0000000000000001\n";
  for (int ranks = kMinRanks; ranks <= kMaxRanks; ++ranks) {
    rows += "all-reduce " + std::to_string(ranks) + " pcie any 0 65536 1shot\n";
    rows += "all-reduce " + std::to_string(ranks) + " pcie any 65537 1073741824 2shot\n";
  }
  std::string why;
  config.table = std::make_shared<const ChoiceTable>(*ChoiceTable::parse(rows, 1, &why));
  configs.push_back(config);
  config.pushMaxBytes = 64 * KiB;
  configs.push_back(config);
  config.pushMaxBytes = config.maxBytes / 2;
  configs.push_back(config);
  for (int maxBlocks : {1, 7, kMaxBlocks + 1}) {
    config = Config{};
    config.maxBlocks = maxBlocks;
    configs.push_back(config);
    config.pushMaxBytes = 0;
    configs.push_back(config);
  }
  return configs;
}

}  // namespace

TEST_CASE("every plan that is ours fits its kernel's buffers and grid", "[policy][plan]") {
  std::size_t plansTaken = 0;
  std::size_t pcieTaken = 0;
  for (const Config& config : settingsToTry()) {
    const BlockLayout layout = layoutFor(pullBufferBytes(config), config.pushMaxBytes);
    const std::size_t stagingBytes = layout.areasOffset - layout.stagingOffset;
    for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
     for (bool nvlink : {true, false}) {
      const CommunicatorFacts comm{ranks, nvlink, 90};
      for (ElementType type : {ElementType::BFloat16, ElementType::Float8E4M3, ElementType::Int32,
                               ElementType::Float64}) {
        const std::size_t size = static_cast<std::size_t>(elementBytes(type));
        const int wire = wirePacksPerPack(type);
        std::vector<std::size_t> counts = {1, 2, 3, 15, 16, 17, 1001};
        for (std::size_t bytes = 256; bytes <= config.maxBytes + 64; bytes *= 2) {
          for (std::size_t near : {bytes - 16, bytes, bytes + 16}) counts.push_back(near / size);
        }
        counts.push_back(config.maxBytes / size);
        for (std::size_t count : counts) {
          const CallPlan plan = planCall(comm, sumOf(type, count), config);
          if (!plan.ours) continue;
          ++plansTaken;
          CAPTURE(ranks, nvlink, elementTypeName(type), count, algorithmName(plan.algorithm), config.pushMaxBytes,
                  config.maxBlocks, forcedAlgorithmName(config.algorithm), config.table != nullptr);
          if (!nvlink) {
            ++pcieTaken;
            CHECK(isPush(plan.algorithm));  // never a pull kernel over PCIe
          }
          REQUIRE(plan.bytes == count * size);
          REQUIRE(plan.packs == packsOf(static_cast<long long>(plan.bytes)));
          REQUIRE(plan.blocks >= 1);
          if (isPush(plan.algorithm)) {
            CHECK(plan.bytes <= config.pushMaxBytes);
            CHECK(specOf(plan.algorithm).areaUse(plan.packs, ranks) * static_cast<std::size_t>(wire) <=
                  layout.areaBytes);
            CHECK(plan.blocks <= std::min(config.maxBlocks, pushBlockLimit(wire)));
            CHECK(plan.threads >= 32);
            CHECK(plan.threads <= kThreadsPerBlock);
            CHECK(plan.threads % 32 == 0);
          } else {
            CHECK(plan.bytes <= stagingBytes);
            // The barrier pairs block b of each rank with block b of every peer: the grid
            // follows from the call and the checked settings alone.
            CHECK(plan.blocks == gridBlocks(plan.packs, std::min(config.maxBlocks, kMaxBlocks)));
            CHECK(plan.blocks <= kMaxBlocks);
            CHECK(plan.threads == kThreadsPerBlock);
          }
        }
      }
     }
    }
  }
  CHECK(plansTaken > 1000);
  CHECK(pcieTaken > 100);
}

TEST_CASE("push grids: one pack per thread in blocks of 128 up to 256 KiB per rank, wider under a cap",
          "[policy][plan]") {
  const Config config;
  const CommunicatorFacts two{2, true, 90};
  struct Expected {
    std::size_t bytes;
    Algorithm algorithm;
    int blocks;
    int threads;
  };
  // fp32 at 2 ranks: 1shot up to 2 MiB, each rank's work the whole message.
  for (const Expected& expected : {Expected{4 * KiB, Algorithm::OneShotPush, 2, 128},
                                   Expected{16 * KiB, Algorithm::OneShotPush, 8, 128},
                                   Expected{256 * KiB, Algorithm::OneShotPush, 128, 128},
                                   Expected{1 * MiB, Algorithm::OneShotPush, 128, kThreadsPerBlock},
                                   Expected{8 * MiB, Algorithm::TwoShotPush, 256, kThreadsPerBlock / 2}}) {
    CAPTURE(expected.bytes);
    const CallPlan plan = planCall(two, sumOf(ElementType::Float32, expected.bytes / 4), config);
    REQUIRE(plan.ours);
    CHECK(plan.algorithm == expected.algorithm);
    CHECK(plan.blocks == expected.blocks);
    CHECK(plan.threads == expected.threads);
  }
  // 2shot's work is a rank's shard: 256 KiB at 8 ranks is 2048 packs per rank, 16 blocks.
  const CallPlan sharded = planCall({8, true, 90}, sumOf(ElementType::Float32, 256 * KiB / 4), config);
  REQUIRE(sharded.algorithm == Algorithm::TwoShotPush);
  CHECK(sharded.blocks == 16);
  CHECK(sharded.threads == 128);
  // Split packs (integers) use at most half the blocks.
  const CallPlan split = planCall(two, sumOf(ElementType::Int32, 2 * MiB / 4), config);
  REQUIRE(split.algorithm == Algorithm::TwoShotPush);
  CHECK(split.blocks == kMaxPushBlocks / 2);
  // NCCL_CAR_MAX_BLOCKS=8 at 64 KiB: 8 blocks, each as wide as its 512 packs.
  Config capped;
  capped.maxBlocks = 8;
  const CallPlan narrow = planCall(two, sumOf(ElementType::Float32, 64 * KiB / 4), capped);
  REQUIRE(narrow.algorithm == Algorithm::OneShotPush);
  CHECK(narrow.blocks == 8);
  CHECK(narrow.threads == 512);
}

TEST_CASE("pull grids: one pack per thread of 512, at most 36 blocks", "[policy][plan]") {
  Config config;
  config.algorithm = Algorithm::OneStage;
  for (std::size_t bytes : {std::size_t{16}, 8 * KiB, 8 * KiB + 16, 8 * MiB}) {
    CAPTURE(bytes);
    const CallPlan plan = planCall({4, true, 90}, sumOf(ElementType::BFloat16, bytes / 2), config);
    REQUIRE(plan.algorithm == Algorithm::OneStage);
    CHECK(plan.blocks == std::min<long long>(kMaxBlocks, std::max<long long>(1, (bytes / 16 + 511) / 512)));
    CHECK(plan.threads == kThreadsPerBlock);
  }
}

TEST_CASE("staging: push kernels read the input themselves; small eager aligned pull calls copy in the kernel",
          "[policy][plan]") {
  Config config;
  for (const AlgorithmSpec& row : kAlgorithms) {
    if (!serves(row.algorithm, Collective::AllReduce)) continue;  // stagingFor is the all-reduce's
    config.algorithm = row.algorithm;
    for (std::size_t bytes : {std::size_t{16}, std::size_t{18}, 64 * KiB, config.copyInKernelBytes,
                              config.copyInKernelBytes + 16, 2 * MiB}) {
      const CallPlan plan = planCall({2, true, 90}, sumOf(ElementType::UInt8, bytes), config);
      REQUIRE(plan.ours);
      REQUIRE(plan.algorithm == row.algorithm);
      for (bool aligned : {false, true}) {
        for (bool capturing : {false, true}) {
          CAPTURE(row.name, bytes, aligned, capturing);
          const Staging staging = stagingFor(plan, aligned, capturing, config);
          if (row.family == KernelFamily::Push) {
            CHECK(staging == Staging::None);
            continue;
          }
          const bool inKernel = aligned && !capturing && bytes % 16 == 0 && bytes <= config.copyInKernelBytes;
          CHECK(staging == (inKernel ? Staging::InKernel : Staging::CopyEngine));
        }
      }
    }
  }
  // NCCL_CAR_COPY_IN_KERNEL_BYTES=0: always the copy engine.
  config.algorithm = Algorithm::TwoStage;
  config.copyInKernelBytes = 0;
  const CallPlan plan = planCall({2, true, 90}, sumOf(ElementType::UInt8, 16), config);
  CHECK(stagingFor(plan, true, false, config) == Staging::CopyEngine);
}

TEST_CASE("ncclAllReduceConfig's facts: NCCL asked for forwards, a kernel asked for wins where it can run, maxCTAs "
          "bounds push grids only", "[policy][plan][call-config]") {
  const Config config;
  const CommunicatorFacts two{2, true, 90};
  CallFacts call = sumOf(ElementType::BFloat16, 64 * KiB / 2);
  REQUIRE(planCall(two, call, config).algorithm == Algorithm::OneShotPush);

  CallFacts toNccl = call;
  toNccl.ncclRequested = true;
  const CallPlan forwarded = planCall(two, toNccl, config);
  CHECK_FALSE(forwarded.ours);
  CHECK(forwarded.reason == ForwardReason::Requested);
  CHECK(std::string(forwardReasonName(ForwardReason::Requested)) == "requested");

  // The call's kernel wins over NCCL_CAR_ALGO's, wherever it can run the call.
  Config forced;
  forced.algorithm = Algorithm::OneShotPush;
  CallFacts asked = call;
  asked.requestedAlgorithm = Algorithm::TwoShotPush;
  CHECK(planCall(two, asked, forced).algorithm == Algorithm::TwoShotPush);
  asked.requestedAlgorithm = Algorithm::OneStage;  // no pull buffers by default: cannot run it
  CHECK(planCall(two, asked, config).algorithm == Algorithm::OneShotPush);

  // maxCTAs = 3: a push grid of at most 3 blocks; a pull grid as every rank computes it.
  CallFacts bounded = call;
  bounded.maxBlocks = 3;
  const CallPlan narrow = planCall(two, bounded, config);
  REQUIRE(narrow.ours);
  CHECK(narrow.blocks == 3);
  CHECK(narrow.blocks * narrow.threads >= 1);
  Config pull;
  pull.algorithm = Algorithm::OneStage;
  pull.pushMaxBytes = 0;
  const CallPlan unbounded = planCall(two, call, pull);
  bounded = call;
  bounded.maxBlocks = 1;
  const CallPlan pullBounded = planCall(two, bounded, pull);
  REQUIRE(pullBounded.algorithm == Algorithm::OneStage);
  CHECK(pullBounded.blocks == unbounded.blocks);
}
