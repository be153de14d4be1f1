// The decision rule of DESIGN.md ("Which all-reduce is ours") and the seed's algorithm
// thresholds, row by row, for every world size and on both sides of every boundary.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "policy.h"

using namespace car;

namespace {

constexpr std::size_t KiB = 1024;

CallFacts sumOf(ElementType type, std::size_t count, std::uintptr_t send = 0x1000, std::uintptr_t recv = 0x2000) {
  CallFacts call;
  call.type = type;
  call.opIsSum = true;
  call.count = count;
  call.sendAddress = send;
  call.recvAddress = recv;
  return call;
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

TEST_CASE("default algorithm: on sm_90, 3 and 4 ranks keep 1stage up to 768 KiB", "[policy]") {
  for (int ranks = 3; ranks <= 4; ++ranks) {
    CAPTURE(ranks);
    const CommunicatorFacts hopper{ranks, true, 90};
    CHECK(defaultAlgorithm(hopper, 512 * KiB) == Algorithm::OneStage);
    CHECK(defaultAlgorithm(hopper, 768 * KiB - 16) == Algorithm::OneStage);
    CHECK(defaultAlgorithm(hopper, 768 * KiB) == Algorithm::TwoStage);
    CHECK(defaultAlgorithm(hopper, 8192 * KiB) == Algorithm::TwoStage);
    CHECK_FALSE(defaultAlgorithm({ranks, false, 90}, 16).has_value());
  }
}

TEST_CASE("default algorithm: the seed's rule everywhere it was not re-measured", "[policy]") {
  for (int capability : {0, 80, 89, 100}) {
    for (int ranks = 2; ranks <= 8; ++ranks) {
      for (std::size_t bytes : {std::size_t{16}, 256 * KiB - 16, 256 * KiB, 512 * KiB - 16, 512 * KiB,
                                768 * KiB, 8192 * KiB}) {
        CAPTURE(capability, ranks, bytes);
        CHECK(defaultAlgorithm({ranks, true, capability}, bytes) == seedAlgorithm(ranks, true, bytes));
      }
    }
  }
  // sm_90 with 2 ranks, or 5 to 8 ranks: measured where possible, the seed's rule kept.
  for (int ranks : {2, 5, 6, 7, 8}) {
    for (std::size_t bytes : {std::size_t{16}, 256 * KiB - 16, 256 * KiB, 512 * KiB, 8192 * KiB}) {
      CAPTURE(ranks, bytes);
      CHECK(defaultAlgorithm({ranks, true, 90}, bytes) == seedAlgorithm(ranks, true, bytes));
    }
  }
}

TEST_CASE("seed algorithm: world sizes outside 2..8 are not ours", "[policy]") {
  CHECK_FALSE(seedAlgorithm(1, true, 16).has_value());
  CHECK_FALSE(seedAlgorithm(9, true, 16).has_value());
  CHECK_FALSE(seedAlgorithm(0, true, 16).has_value());
}

TEST_CASE("NCCL_CAR_ALGO forces a kernel but cannot make an unsupported topology ours", "[policy]") {
  Config config;
  config.algorithm = AlgorithmOverride::TwoStage;
  CHECK(chooseAlgorithm({2, true}, 16, config) == Algorithm::TwoStage);
  CHECK(chooseAlgorithm({8, true}, 16, config) == Algorithm::TwoStage);
  config.algorithm = AlgorithmOverride::OneStage;
  CHECK(chooseAlgorithm({8, true}, 8192 * KiB, config) == Algorithm::OneStage);
  CHECK_FALSE(chooseAlgorithm({4, false}, 16, config).has_value());
  config.algorithm = AlgorithmOverride::Auto;
  CHECK(chooseAlgorithm({4, true, 90}, 512 * KiB, config) == Algorithm::OneStage);
  CHECK(chooseAlgorithm({4, true, 80}, 512 * KiB, config) == Algorithm::TwoStage);
}

TEST_CASE("decideCall takes an eligible sum of a supported type", "[policy]") {
  const Config config;
  for (ElementType type : {ElementType::Float16, ElementType::BFloat16, ElementType::Float32}) {
    const std::size_t count = 4096 / elementBytes(type);
    const CallDecision decision = decideCall({4, true}, sumOf(type, count), config);
    CHECK(decision.ours);
    CHECK(decision.bytes == 4096);
    CHECK(decision.algorithm == Algorithm::OneStage);
  }
}

TEST_CASE("decideCall forwards with the reason", "[policy]") {
  const Config config;
  const CommunicatorFacts comm{4, true};

  SECTION("disabled") {
    Config disabled;
    disabled.disable = true;
    CHECK(decideCall(comm, sumOf(ElementType::Float32, 4), disabled).reason == ForwardReason::Disabled);
  }
  SECTION("op other than sum") {
    CallFacts call = sumOf(ElementType::Float32, 4);
    call.opIsSum = false;
    CHECK(decideCall(comm, call, config).reason == ForwardReason::Op);
  }
  SECTION("unsupported type") {
    CallFacts call = sumOf(ElementType::Float32, 4);
    call.type.reset();
    CHECK(decideCall(comm, call, config).reason == ForwardReason::Type);
  }
  SECTION("zero elements") {
    CHECK(decideCall(comm, sumOf(ElementType::Float32, 0), config).reason == ForwardReason::Empty);
  }
  SECTION("bytes not a multiple of 16") {
    CHECK(decideCall(comm, sumOf(ElementType::Float32, 3), config).reason == ForwardReason::NotMultipleOf16);
    CHECK(decideCall(comm, sumOf(ElementType::BFloat16, 12), config).reason == ForwardReason::NotMultipleOf16);
  }
  SECTION("the size limit is inclusive") {
    const std::size_t atLimit = config.maxBytes / 2;
    CHECK(decideCall(comm, sumOf(ElementType::Float16, atLimit), config).ours);
    CHECK(decideCall(comm, sumOf(ElementType::Float16, atLimit + 8), config).reason == ForwardReason::TooLarge);
    CHECK(decideCall(comm, sumOf(ElementType::Float32, config.maxBytes / 4 + 4), config).reason ==
          ForwardReason::TooLarge);
  }
  SECTION("a huge count does not overflow into a small size") {
    const std::size_t huge = (~std::size_t{0}) / 2 + 8;  // huge * 2 wraps around
    CHECK(decideCall(comm, sumOf(ElementType::Float16, huge), config).reason == ForwardReason::TooLarge);
  }
  SECTION("misaligned receive pointer; a misaligned send pointer is fine (copied into staging)") {
    CHECK(decideCall(comm, sumOf(ElementType::Float32, 4, 0x1000, 0x2004), config).reason == ForwardReason::Misaligned);
    CHECK(decideCall(comm, sumOf(ElementType::Float32, 4, 0x1000, 0x2008), config).reason == ForwardReason::Misaligned);
    CHECK(decideCall(comm, sumOf(ElementType::Float32, 4, 0x1008, 0x2000), config).ours);
    CHECK(decideCall(comm, sumOf(ElementType::Float16, 8, 0x1002, 0x2000), config).ours);
  }
  SECTION("more than two ranks without full NVLink") {
    CHECK(decideCall({4, false}, sumOf(ElementType::Float32, 4), config).reason == ForwardReason::NotEligible);
    CHECK(decideCall({2, false}, sumOf(ElementType::Float32, 4), config).ours);
  }
}

TEST_CASE("a lower NCCL_CAR_MAX_BYTES moves the limit", "[policy]") {
  Config config;
  config.maxBytes = 4096;
  CHECK(decideCall({2, true}, sumOf(ElementType::Float32, 1024), config).ours);
  CHECK(decideCall({2, true}, sumOf(ElementType::Float32, 1028), config).reason == ForwardReason::TooLarge);
}

TEST_CASE("every forward reason has a distinct name", "[policy]") {
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(ForwardReason::kCount); ++i) {
    names.insert(forwardReasonName(static_cast<ForwardReason>(i)));
  }
  CHECK(names.size() == static_cast<std::size_t>(ForwardReason::kCount));
  CHECK(names.count("?") == 0);
}
