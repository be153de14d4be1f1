// The decision rule of docs/design.md ("Which calls are ours: the decision rule"), the push kernels' table and the
// seed's pull thresholds, row by row, for every world size and on both sides of every boundary.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "call_facts.h"
#include "policy.h"

using namespace car;
using car::testing::sumOf;

namespace {

constexpr std::size_t KiB = 1024;

// The pull kernels alone, as before the push kernels existed.
Config pullOnly() {
  Config config;
  config.pushMaxBytes = 0;
  return config;
}

}  // namespace

TEST_CASE("seed algorithm: two ranks always 1stage, with or without NVLink", "[policy]") {
  for (std::size_t bytes : {std::size_t{16}, 512 * KiB, 8192 * KiB}) {
    CHECK(seedAlgorithm(2, true, bytes) == Algorithm::OneStage);
    CHECK(seedAlgorithm(2, false, bytes) == Algorithm::OneStage);
  }
}

TEST_CASE("seed algorithm: thresholds for 3 to 8 ranks", "[policy]") {
  for (int ranks = 3; ranks <= 8; ++ranks) {
    CAPTURE(ranks);
    const std::size_t limit = ranks <= 4 ? 512 * KiB : 256 * KiB;
    CHECK(seedAlgorithm(ranks, true, 16) == Algorithm::OneStage);
    CHECK(seedAlgorithm(ranks, true, limit - 16) == Algorithm::OneStage);
    CHECK(seedAlgorithm(ranks, true, limit) == Algorithm::TwoStage);
    CHECK(seedAlgorithm(ranks, true, 8192 * KiB) == Algorithm::TwoStage);
    // More than two ranks without full NVLink: no kernel, never a silent no-op.
    CHECK_FALSE(seedAlgorithm(ranks, false, 16).has_value());
  }
}

TEST_CASE("pull algorithm: on sm_90, 3 and 4 ranks keep 1stage up to 768 KiB", "[policy]") {
  for (int ranks = 3; ranks <= 4; ++ranks) {
    CAPTURE(ranks);
    const CommunicatorFacts hopper{ranks, true, 90};
    CHECK(pullAlgorithm(hopper, 512 * KiB) == Algorithm::OneStage);
    CHECK(pullAlgorithm(hopper, 768 * KiB - 16) == Algorithm::OneStage);
    CHECK(pullAlgorithm(hopper, 768 * KiB) == Algorithm::TwoStage);
    CHECK(pullAlgorithm(hopper, 8192 * KiB) == Algorithm::TwoStage);
    CHECK_FALSE(pullAlgorithm({ranks, false, 90}, 16).has_value());
  }
}

TEST_CASE("pull algorithm: the seed's rule everywhere it was not re-measured", "[policy]") {
  for (int capability : {0, 80, 89, 100}) {
    for (int ranks = 2; ranks <= 8; ++ranks) {
      for (std::size_t bytes : {std::size_t{16}, 256 * KiB - 16, 256 * KiB, 512 * KiB - 16, 512 * KiB,
                                768 * KiB, 8192 * KiB}) {
        CAPTURE(capability, ranks, bytes);
        CHECK(pullAlgorithm({ranks, true, capability}, bytes) == seedAlgorithm(ranks, true, bytes));
      }
    }
  }
  // sm_90 with 2 ranks, or 5 to 8 ranks: measured where possible, the seed's rule kept.
  for (int ranks : {2, 5, 6, 7, 8}) {
    for (std::size_t bytes : {std::size_t{16}, 256 * KiB - 16, 256 * KiB, 512 * KiB, 8192 * KiB}) {
      CAPTURE(ranks, bytes);
      CHECK(pullAlgorithm({ranks, true, 90}, bytes) == seedAlgorithm(ranks, true, bytes));
    }
  }
}

TEST_CASE("seed algorithm: world sizes outside 2..8 are not ours", "[policy]") {
  CHECK_FALSE(seedAlgorithm(1, true, 16).has_value());
  CHECK_FALSE(seedAlgorithm(9, true, 16).has_value());
  CHECK_FALSE(seedAlgorithm(0, true, 16).has_value());
}

TEST_CASE("default: 1shot up to the table's limit, then 2shot up to NCCL_CAR_PUSH_MAX_BYTES, then pull",
          "[policy]") {
  Config config;
  config.maxBytes = 64 << 20;  // room above the push limit
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    for (int capability : {0, 80, 90}) {
      const CommunicatorFacts comm{ranks, true, capability};
      const std::size_t limit = oneShotLimit(comm);
      CAPTURE(ranks, capability, limit);
      REQUIRE(limit >= 64 * KiB);
      CHECK(defaultAlgorithm(comm, 1, config, 1).algorithm == Algorithm::OneShotPush);
      CHECK(defaultAlgorithm(comm, 16, config, 1).algorithm == Algorithm::OneShotPush);
      CHECK(defaultAlgorithm(comm, limit, config, 1).algorithm == Algorithm::OneShotPush);
      CHECK(defaultAlgorithm(comm, limit + 2, config, 1).algorithm == Algorithm::TwoShotPush);
      CHECK(defaultAlgorithm(comm, config.pushMaxBytes, config, 1).algorithm == Algorithm::TwoShotPush);
      CHECK(defaultAlgorithm(comm, config.pushMaxBytes + 16, config, 1).algorithm ==
            pullAlgorithm(comm, config.pushMaxBytes + 16));
      // Above the push limit a pull kernel takes any byte count too.
      CHECK(defaultAlgorithm(comm, config.pushMaxBytes + 18, config, 1).algorithm ==
            pullAlgorithm(comm, config.pushMaxBytes + 18));
    }
  }
}

TEST_CASE("1shot only where every rank's copy fits one receive area", "[policy]") {
  Config config;
  config.pushMaxBytes = 64 * KiB;  // areas of about 128 KiB
  const CommunicatorFacts eight{8, true, 90};
  REQUIRE(oneShotLimit(eight) >= 16 * KiB);
  CHECK(canRun(Algorithm::OneShotPush, eight, 16 * KiB, config, 1));        // 8 x 16 KiB fits
  CHECK_FALSE(canRun(Algorithm::OneShotPush, eight, 32 * KiB, config, 1));  // 8 x 32 KiB does not
  CHECK(defaultAlgorithm(eight, 32 * KiB, config, 1).algorithm == Algorithm::TwoShotPush);
  CHECK(canRun(Algorithm::TwoShotPush, eight, 64 * KiB, config, 1));
  CHECK_FALSE(canRun(Algorithm::TwoShotPush, eight, 64 * KiB + 2, config, 1));
}

TEST_CASE("NCCL_CAR_PUSH_MAX_BYTES=0 leaves the pull rule alone", "[policy]") {
  const Config config = pullOnly();
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    for (std::size_t bytes : {std::size_t{16}, 256 * KiB, 768 * KiB, 8192 * KiB}) {
      const CommunicatorFacts comm{ranks, true, 90};
      CAPTURE(ranks, bytes);
      CHECK(defaultAlgorithm(comm, bytes, config, 1).algorithm == pullAlgorithm(comm, bytes));
      CHECK_FALSE(canRun(Algorithm::OneShotPush, comm, bytes, config, 1));
      CHECK_FALSE(canRun(Algorithm::TwoShotPush, comm, bytes, config, 1));
    }
  }
}

TEST_CASE("NCCL_CAR_ALGO forces a kernel wherever it can run the call", "[policy]") {
  Config config;
  config.algorithm = Algorithm::TwoStage;
  CHECK(chooseAlgorithm({2, true}, 16, config, 1).algorithm == Algorithm::TwoStage);
  CHECK(chooseAlgorithm({8, true}, 16, config, 1).algorithm == Algorithm::TwoStage);
  // Pull kernels take any byte count as well.
  CHECK(chooseAlgorithm({8, true}, 18, config, 1).algorithm == Algorithm::TwoStage);
  config.algorithm = Algorithm::OneStage;
  CHECK(chooseAlgorithm({8, true}, 8192 * KiB, config, 1).algorithm == Algorithm::OneStage);
  CHECK_FALSE(chooseAlgorithm({4, false}, 16, config, 1).algorithm.has_value());
  config.algorithm = Algorithm::TwoShotPush;
  CHECK(chooseAlgorithm({8, true}, 16, config, 1).algorithm == Algorithm::TwoShotPush);
  config.algorithm = Algorithm::OneShotPush;
  CHECK(chooseAlgorithm({2, true}, 8192 * KiB, config, 1).algorithm == Algorithm::OneShotPush);
  // 8 copies of 8 MiB do not fit an area: the default runs it.
  CHECK(chooseAlgorithm({8, true}, 8192 * KiB, config, 1).algorithm == Algorithm::TwoShotPush);
  config.algorithm = std::nullopt;
  const Config pull = pullOnly();
  CHECK(chooseAlgorithm({4, true, 90}, 512 * KiB, pull, 1).algorithm == Algorithm::OneStage);
  CHECK(chooseAlgorithm({4, true, 80}, 512 * KiB, pull, 1).algorithm == Algorithm::TwoStage);
}

TEST_CASE("planCall takes an eligible sum of a supported type, of any element count", "[policy]") {
  const Config config;
  for (ElementType type : {ElementType::Float16, ElementType::BFloat16, ElementType::Float32}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{3}, 4096 / static_cast<std::size_t>(elementBytes(type)), std::size_t{1001}}) {
      CAPTURE(elementTypeName(type), count);
      const CallPlan plan = planCall({4, true}, sumOf(type, count), config);
      CHECK(plan.ours);
      CHECK(plan.bytes == count * elementBytes(type));
      CHECK(plan.algorithm == Algorithm::OneShotPush);
    }
  }
}

TEST_CASE("every built-in op and every type is taken, any element count, by pull kernels too", "[policy]") {
  for (const Config& config : {Config{}, pullOnly()}) {
    for (int t = 0; t < kElementTypeCount; ++t) {
      for (int o = 0; o < kReduceOpCount; ++o) {
        for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{1001}}) {
          CallFacts call = sumOf(static_cast<ElementType>(t), count);
          call.op = static_cast<ReduceOp>(o);
          CAPTURE(elementTypeName(*call.type), reduceOpName(*call.op), count, config.pushMaxBytes);
          const CallPlan plan = planCall({2, true, 90}, call, config);
          CHECK(plan.ours);
          CHECK(plan.bytes == count * elementBytes(*call.type));
          CHECK(isPush(plan.algorithm) == (config.pushMaxBytes > 0));
        }
      }
    }
  }
}

TEST_CASE("fp8 only where NCCL reduces it: every GPU sm_90 or newer", "[policy]") {
  const Config config;
  for (ElementType fp8 : {ElementType::Float8E4M3, ElementType::Float8E5M2}) {
    CAPTURE(elementTypeName(fp8));
    CHECK(planCall({2, true, 90}, sumOf(fp8, 64), config).ours);
    CHECK(planCall({2, true, 100}, sumOf(fp8, 64), config).ours);
    // NCCL fails these calls; so must the program with the library loaded.
    CHECK(planCall({2, true, 80}, sumOf(fp8, 64), config).reason == ForwardReason::Type);
    // 0: unknown, or the ranks' GPUs differ.
    CHECK(planCall({2, true, 0}, sumOf(fp8, 64), config).reason == ForwardReason::Type);
  }
  CHECK(planCall({2, true, 80}, sumOf(ElementType::BFloat16, 64), config).ours);
}

TEST_CASE("where the area, not the measured limit, stops split packs", "[policy]") {
  Config config;
  config.pushMaxBytes = 1024 * KiB;  // areas of about 2 MiB; pull buffers exist above it
  const CommunicatorFacts two{2, true, 90};
  // Split packs take 4 x the message in 2shot's area (and in 1shot's at 2 ranks): 600 KiB of
  // int32 fits neither.
  CHECK(planCall(two, sumOf(ElementType::Int32, 600 * KiB / 4), config).algorithm == Algorithm::OneStage);
  CHECK(planCall(two, sumOf(ElementType::Int32, 400 * KiB / 4), config).algorithm == Algorithm::TwoShotPush);
  CHECK(planCall(two, sumOf(ElementType::Int32, 100 * KiB / 4), config).algorithm == Algorithm::OneShotPush);
  CHECK(planCall(two, sumOf(ElementType::Float32, 600 * KiB / 4), config).algorithm == Algorithm::OneShotPush);
  // 8 ranks: 1shot's area use is 8 x the message, split 16 x.
  Config small;
  small.pushMaxBytes = 64 * KiB;
  const CommunicatorFacts eight{8, true, 90};
  CHECK(canRun(Algorithm::OneShotPush, eight, 16 * KiB, small, 1));
  CHECK_FALSE(canRun(Algorithm::OneShotPush, eight, 16 * KiB, small, 2));
  CHECK(canRun(Algorithm::OneShotPush, eight, 8 * KiB, small, 2));
}

TEST_CASE("types without a spare bit pattern send twice the bytes: push limits halve", "[policy]") {
  const Config config;
  const CommunicatorFacts two{2, true, 90};
  REQUIRE(wirePacksPerPack(ElementType::BFloat16) == 1);
  REQUIRE(wirePacksPerPack(ElementType::Float8E4M3) == 1);
  for (ElementType split : {ElementType::Int8, ElementType::Int32, ElementType::UInt64, ElementType::Float64}) {
    CAPTURE(elementTypeName(split));
    CHECK(wirePacksPerPack(split) == 2);
  }
  const std::size_t limit = oneShotLimit(two);
  CHECK(defaultAlgorithm(two, limit, config, 1).algorithm == Algorithm::OneShotPush);
  CHECK(defaultAlgorithm(two, limit, config, 2).algorithm == Algorithm::TwoShotPush);
  // Measured: split 1shot up to a sixteenth of the limit, split 2shot up to 2 MiB, NCCL above.
  CHECK(defaultAlgorithm(two, limit / 16, config, 2).algorithm == Algorithm::OneShotPush);
  CHECK(defaultAlgorithm(two, 128 * KiB, config, 2).algorithm == Algorithm::OneShotPush);
  CHECK(defaultAlgorithm(two, limit / 16 + 8, config, 2).algorithm == Algorithm::TwoShotPush);
  CHECK(defaultAlgorithm(two, 512 * KiB, config, 2).algorithm == Algorithm::TwoShotPush);
  CHECK(defaultAlgorithm(two, 2048 * KiB, config, 2).algorithm == Algorithm::TwoShotPush);
  const AlgorithmChoice above = defaultAlgorithm(two, 2048 * KiB + 8, config, 2);
  CHECK_FALSE(above.algorithm.has_value());
  CHECK(above.reason == ForwardReason::TooLarge);
  CallFacts int64 = sumOf(ElementType::Int64, config.pushMaxBytes / 8);
  CHECK(planCall(two, int64, config).reason == ForwardReason::TooLarge);
  CHECK(planCall(two, sumOf(ElementType::Float32, config.pushMaxBytes / 4), config).ours);
  // 2shot's area holds about 2 x the message: split packs fit a forced 2shot up to about half.
  Config forcedTwoShot;
  forcedTwoShot.algorithm = Algorithm::TwoShotPush;
  CHECK(chooseAlgorithm(two, config.pushMaxBytes / 2 - 64, forcedTwoShot, 2).algorithm == Algorithm::TwoShotPush);
  // Where the pull kernels have buffers, they take what the areas cannot.
  Config lowered;
  lowered.pushMaxBytes = lowered.maxBytes / 2;
  CHECK(planCall(two, sumOf(ElementType::Int64, lowered.maxBytes / 8), lowered).algorithm == Algorithm::OneStage);
  // A forced push kernel runs only what fits its area.
  Config forced;
  forced.algorithm = Algorithm::TwoShotPush;
  CHECK_FALSE(canRun(Algorithm::TwoShotPush, two, forced.pushMaxBytes, forced, 2));
  CHECK(canRun(Algorithm::TwoShotPush, two, forced.pushMaxBytes, forced, 1));
}

TEST_CASE("planCall forwards with the reason", "[policy]") {
  const Config config;
  const CommunicatorFacts comm{4, true};

  SECTION("an op NCCL made at run time (ncclRedOpCreatePreMulSum)") {
    CallFacts call = sumOf(ElementType::Float32, 4);
    call.op.reset();
    CHECK(planCall(comm, call, config).reason == ForwardReason::Op);
  }
  SECTION("unsupported type") {
    CallFacts call = sumOf(ElementType::Float32, 4);
    call.type.reset();
    CHECK(planCall(comm, call, config).reason == ForwardReason::Type);
  }
  SECTION("zero elements") {
    CHECK(planCall(comm, sumOf(ElementType::Float32, 0), config).reason == ForwardReason::Empty);
  }
  SECTION("the size limit is inclusive") {
    const std::size_t atLimit = config.maxBytes / 2;
    CHECK(planCall(comm, sumOf(ElementType::Float16, atLimit), config).ours);
    CHECK(planCall(comm, sumOf(ElementType::Float16, atLimit + 8), config).reason == ForwardReason::TooLarge);
    CHECK(planCall(comm, sumOf(ElementType::Float32, config.maxBytes / 4 + 4), config).reason ==
          ForwardReason::TooLarge);
  }
  SECTION("a huge count does not overflow into a small size") {
    const std::size_t huge = (~std::size_t{0}) / 2 + 8;  // huge * 2 wraps around
    CHECK(planCall(comm, sumOf(ElementType::Float16, huge), config).reason == ForwardReason::TooLarge);
  }
  SECTION("the PCIe case without a measured table, 2 ranks included") {
    CHECK(planCall({4, false}, sumOf(ElementType::Float32, 4), config).reason == ForwardReason::Untuned);
    CHECK(planCall({2, false}, sumOf(ElementType::Float32, 4), config).reason == ForwardReason::Untuned);
  }
}

TEST_CASE("a lower NCCL_CAR_MAX_BYTES moves the limit", "[policy]") {
  Config config;
  config.maxBytes = 4096;
  CHECK(planCall({2, true}, sumOf(ElementType::Float32, 1024), config).ours);
  CHECK(planCall({2, true}, sumOf(ElementType::Float32, 1028), config).reason == ForwardReason::TooLarge);
}

TEST_CASE("every forward reason has a distinct name", "[policy]") {
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(ForwardReason::kCount); ++i) {
    names.insert(forwardReasonName(static_cast<ForwardReason>(i)));
  }
  CHECK(names.size() == static_cast<std::size_t>(ForwardReason::kCount));
  CHECK(names.count("?") == 0);
}

TEST_CASE("the pull kernels' buffers exist only where a call can reach a pull kernel", "[policy]") {
  Config config;  // push kernels up to NCCL_CAR_MAX_BYTES: no pull kernel is ever chosen
  CHECK_FALSE(pullKernelsReachable(config));
  CHECK(pullBufferBytes(config) == 0);
  CHECK_FALSE(canRun(Algorithm::OneStage, {2, true}, 16, config, 1));
  config.algorithm = Algorithm::TwoStage;
  CHECK(pullBufferBytes(config) == config.maxBytes);
  CHECK(canRun(Algorithm::TwoStage, {2, true}, 16, config, 1));
  config.algorithm = Algorithm::OneShotPush;  // forcing a push kernel changes nothing
  CHECK(pullBufferBytes(config) == 0);
  config.algorithm = std::nullopt;
  config.pushMaxBytes = config.maxBytes / 2;  // the largest calls go to a pull kernel
  CHECK(pullBufferBytes(config) == config.maxBytes);
  CHECK(defaultAlgorithm({2, true}, config.maxBytes, config, 1).algorithm == Algorithm::OneStage);
  // Whatever the settings, a call the policy takes fits the buffers it goes through.
  for (std::optional<Algorithm> algorithm : {std::optional<Algorithm>(), std::optional(Algorithm::OneStage), std::optional(Algorithm::TwoShotPush)}) {
    for (std::size_t pushMax : {std::size_t{0}, std::size_t{64} << 10, config.maxBytes}) {
      Config c;
      c.algorithm = algorithm;
      c.pushMaxBytes = pushMax;
      for (std::size_t bytes : {std::size_t{16}, std::size_t{100}, std::size_t{1} << 20, c.maxBytes}) {
        const AlgorithmChoice choice = chooseAlgorithm({4, true, 90}, bytes, c, 1);
        if (!choice.algorithm) continue;
        CAPTURE(forcedAlgorithmName(algorithm), pushMax, bytes);
        CHECK((isPush(*choice.algorithm) ? bytes <= c.pushMaxBytes : bytes <= pullBufferBytes(c)));
      }
    }
  }
}

TEST_CASE("calls on NCCL symmetric windows go to NCCL up to NCCL_CAR_SYMMETRIC_NCCL_BYTES", "[policy]") {
  Config config;
  CallFacts call = sumOf(ElementType::BFloat16, 8192);  // 16 KiB
  call.symmetricBuffers = true;
  CHECK(planCall({2, true}, call, config).ours);  // the default, 0: never
  config.symmetricNcclBytes = 16 * KiB;
  const CallPlan atLimit = planCall({2, true}, call, config);
  CHECK_FALSE(atLimit.ours);
  CHECK(atLimit.reason == ForwardReason::SymmetricWindow);
  call.count += 1;  // one element above: ours again
  CHECK(planCall({2, true}, call, config).ours);
  call.count -= 1;
  call.symmetricBuffers = false;  // plain buffers: ours whatever the setting
  CHECK(planCall({2, true}, call, config).ours);
}

TEST_CASE("NCCL_CAR_DETERMINISTIC keeps fp64 and symmetric-window calls ours, and changes nothing else",
          "[policy][invariance]") {
  Config plain;
  Config deterministic;
  deterministic.deterministic = true;
  const CommunicatorFacts two{2, true, 90};
  // fp64 above the split 2shot limit: NCCL's by default, 2shot's as far as its area holds it.
  const CallFacts fp64 = sumOf(ElementType::Float64, (2048 * KiB + 8) / 8);
  CHECK(planCall(two, fp64, plain).reason == ForwardReason::TooLarge);
  const CallPlan kept = planCall(two, fp64, deterministic);
  CHECK(kept.ours);
  CHECK(kept.algorithm == Algorithm::TwoShotPush);
  CHECK(canRun(Algorithm::TwoShotPush, two, 4096 * KiB - 64, deterministic, 2));
  CHECK(planCall(two, sumOf(ElementType::Float64, (4096 * KiB - 64) / 8), deterministic).ours);
  CHECK(planCall(two, sumOf(ElementType::Float64, 8192 * KiB / 8), deterministic).reason == ForwardReason::TooLarge);
  // Integers are exact in any order: NCCL's result is ours, and the faster one stays.
  CHECK(planCall(two, sumOf(ElementType::Int64, (2048 * KiB + 8) / 8), deterministic).reason ==
        ForwardReason::TooLarge);
  CHECK(invariantOnNccl(ElementType::Int8));
  CHECK(invariantOnNccl(ElementType::UInt64));
  CHECK_FALSE(invariantOnNccl(ElementType::Float64));
  CHECK_FALSE(invariantOnNccl(ElementType::Float8E5M2));
  CHECK_FALSE(invariantOnNccl(std::nullopt));
  // Symmetric windows: NCCL's symmetric kernels promise nothing either.
  CallFacts windowed = sumOf(ElementType::BFloat16, 8192);
  windowed.symmetricBuffers = true;
  plain.symmetricNcclBytes = deterministic.symmetricNcclBytes = 16 * KiB;
  CHECK(planCall(two, windowed, plain).reason == ForwardReason::SymmetricWindow);
  CHECK(planCall(two, windowed, deterministic).ours);
  plain.symmetricNcclBytes = deterministic.symmetricNcclBytes = 0;

  // Everything else decides as without the setting: every kernel keeps the promise.
  for (int ranks = 1; ranks <= kMaxRanks + 1; ++ranks) {
    for (bool nvlink : {true, false}) {
      const CommunicatorFacts comm{ranks, nvlink, 90};
      for (int t = 0; t < kElementTypeCount; ++t) {
        const ElementType type = static_cast<ElementType>(t);
        for (std::size_t bytes : {std::size_t{16}, 64 * KiB, 512 * KiB + 16, 2048 * KiB, 2048 * KiB + 16, 8192 * KiB,
                                  8192 * KiB + 16}) {
          const CallFacts call = sumOf(type, bytes / elementBytes(type));
          const CallPlan before = planCall(comm, call, plain);
          const CallPlan after = planCall(comm, call, deterministic);
          CAPTURE(ranks, nvlink, elementTypeName(type), bytes);
          if (type == ElementType::Float64 && !before.ours && before.reason == ForwardReason::TooLarge &&
              after.ours) {
            CHECK(after.algorithm == Algorithm::TwoShotPush);
            continue;
          }
          CHECK(after.ours == before.ours);
          CHECK(after.reason == before.reason);
          if (before.ours) CHECK(after.algorithm == before.algorithm);
        }
      }
    }
  }
}

TEST_CASE("PCIe: no built-in sizes; every call forwarded untuned until measured, at every world size", "[policy][pcie]") {
  Config lowered;  // pull buffers exist: the pull rule would be reachable on NVLink
  lowered.pushMaxBytes = lowered.maxBytes / 2;
  for (const Config& config : {Config{}, lowered, pullOnly()}) {
    for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
      for (int capability : {0, 80, 89, 90, 120}) {
        const CommunicatorFacts pcie{ranks, false, capability};
        CHECK(linksOf(pcie) == Links::Pcie);
        for (int t = 0; t < kElementTypeCount; ++t) {
          for (std::size_t bytes : {std::size_t{16}, 4 * KiB, 256 * KiB, 2048 * KiB, config.maxBytes}) {
            const ElementType type = static_cast<ElementType>(t);
            CAPTURE(ranks, capability, elementTypeName(type), bytes, config.pushMaxBytes);
            const CallPlan plan = planCall(pcie, sumOf(type, bytes / elementBytes(type)), config);
            CHECK_FALSE(plan.ours);
            // fp8 below sm_90 is NCCL's refusal to keep, whatever the links.
            const bool refusedFp8 = isFp8(type) && capability < 90;
            CHECK(plan.reason == (refusedFp8 ? ForwardReason::Type : ForwardReason::Untuned));
          }
        }
        CHECK(defaultAlgorithm(pcie, 16, config, 1).reason == ForwardReason::Untuned);
      }
    }
  }
  // The checks before the case still come first: a call past the limit is too large.
  CHECK(planCall({4, false}, sumOf(ElementType::Float32, Config{}.maxBytes / 4 + 4), Config{}).reason ==
        ForwardReason::TooLarge);
  CHECK(std::string(forwardReasonName(ForwardReason::Untuned)) == "untuned");
}

TEST_CASE("PCIe: never a pull kernel, forced or not; a forced push kernel runs (tune measures it so)",
          "[policy][pcie]") {
  Config config;
  config.pushMaxBytes = config.maxBytes / 2;  // pull buffers exist
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    const CommunicatorFacts pcie{ranks, false, 90};
    CAPTURE(ranks);
    for (Algorithm pull : {Algorithm::OneStage, Algorithm::TwoStage}) {
      CHECK_FALSE(canRun(pull, pcie, 16, config, 1));
      CHECK(canRun(pull, {ranks, true, 90}, 16, config, 1));
      Config forced = config;
      forced.algorithm = pull;
      CHECK(planCall(pcie, sumOf(ElementType::BFloat16, 8), forced).reason == ForwardReason::Untuned);
      CallFacts asked = sumOf(ElementType::BFloat16, 8);
      asked.requestedAlgorithm = pull;
      CHECK(planCall(pcie, asked, config).reason == ForwardReason::Untuned);
    }
    CHECK_FALSE(pullAlgorithm(pcie, 16).has_value());
    CHECK_FALSE(pullAlgorithm({2, false, 90}, 16).has_value());  // the seed took 2 ranks without NVLink
    for (Algorithm push : {Algorithm::OneShotPush, Algorithm::TwoShotPush}) {
      Config forced = config;
      forced.algorithm = push;
      const CallPlan plan = planCall(pcie, sumOf(ElementType::BFloat16, 8), forced);
      CHECK(plan.ours);
      CHECK(plan.algorithm == push);
      CallFacts asked = sumOf(ElementType::BFloat16, 8);
      asked.requestedAlgorithm = push;
      CHECK(planCall(pcie, asked, config).algorithm == push);
      // Where it cannot run the call (2 x 4 MiB does not fit 1shot's area at 8 ranks), no
      // fallback to a built-in choice: NCCL.
      if (push == Algorithm::OneShotPush && ranks == 8) {
        CHECK(planCall(pcie, sumOf(ElementType::BFloat16, config.pushMaxBytes / 2), forced).reason ==
              ForwardReason::Untuned);
      }
    }
    // The all-gather and the reduce-scatter: their own kernel when the call asks for it.
    for (Collective mover : {Collective::AllGather, Collective::ReduceScatter}) {
      CallFacts call = car::testing::callOf(mover, ElementType::BFloat16, 8);
      CHECK(planCall(pcie, call, config).reason == ForwardReason::Untuned);
      call.requestedAlgorithm = Algorithm::OneShotPush;  // a kernel of another collective: not a request for ours
      CHECK(planCall(pcie, call, config).reason == ForwardReason::Untuned);
      call.requestedAlgorithm = mover == Collective::AllGather ? Algorithm::AllGatherPush : Algorithm::ReduceScatterPush;
      CHECK(planCall(pcie, call, config).ours);
    }
  }
}
