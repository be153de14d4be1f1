// Sums of fp16, bf16 and fp32 (every op on every type: test_ops.cc) at every world size
// 2..8, on every kernel, sizes from 2 bytes to 8 MiB including uneven ones, in-place and
// out-of-place, any alignment: against an fp64 reference on fresh random data, every output
// element starting as no right answer (so every one must be written), every rank's output
// bitwise identical. The pull kernels also run with their input copied by the copy engine,
// inside the kernel, or each way on alternate ranks.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <map>

#include "device_buffers.h"
#include "host_data.h"
#include "policy.h"
#include "rank_group.h"

using namespace car;
using namespace car::testing;

namespace {

constexpr int kDevice = 0;
constexpr ElementType kTypes[] = {ElementType::Float16, ElementType::BFloat16, ElementType::Float32};
constexpr Algorithm kPush[] = {Algorithm::OneShotPush, Algorithm::TwoShotPush};
constexpr Algorithm kPull[] = {Algorithm::OneStage, Algorithm::TwoStage};

// Whole packs: counts that are not multiples of the world size or of 512 threads, the edges
// of the algorithm thresholds, and the 8 MiB maximum itself.
const std::size_t kPackSizes[] = {
    16,          48,           1008,         4096 + 16,       65536 + 48,
    262144 - 16, 262144,       524288 + 80,  1048576 + 112,   8388608,
};
// Sizes only the push kernels take: a last partial pack, fewer packs than ranks.
const std::size_t kOddSizes[] = {2, 4, 6, 12, 18, 36, 100, 1000 + 4, 65536 + 6, 1048576 + 2};

// Who copies each rank's input into its staging (pull kernels). Eager calls up to
// copyInKernelBytes copy inside the kernel; the ranks of one call need not agree.
enum class CopyMode { CopyEngine, InKernel, Alternating };

const char* copyModeName(CopyMode mode) {
  switch (mode) {
    case CopyMode::CopyEngine: return "copy-engine";
    case CopyMode::InKernel: return "in-kernel";
    case CopyMode::Alternating: return "alternating";
  }
  return "?";
}

std::function<Config(int)> configsFor(Config base, CopyMode mode) {
  return [base, mode](int rank) {
    Config config = base;
    const bool inKernel = mode == CopyMode::InKernel || (mode == CopyMode::Alternating && rank % 2 == 0);
    config.copyInKernelBytes = inKernel ? kLargestMaxBytes : 0;
    return config;
  };
}

int deviceCapability() { return computeCapability(kDevice); }

// The kernel the policy runs this call on: the forced one where it can, else the default.
Algorithm expectedAlgorithm(int ranks, ElementType type, std::size_t bytes, const Config& config) {
  return *chooseAlgorithm(CommunicatorFacts{ranks, true, deviceCapability()}, bytes, config, wirePacksPerPack(type))
              .algorithm;
}

struct CaseResult {
  std::size_t mismatches = 0;
  std::string firstMismatch;
  int differingRank = -1;  // a rank whose output differs from rank 0's bits
  Algorithm ran = Algorithm::kCount;
};

// One all-reduce of `count` elements; send/recv start `shift` bytes into each rank's buffer.
CaseResult runCase(RankGroup& group, DeviceBuffers& in, DeviceBuffers& out, ElementType type,
                   std::size_t count, bool inPlace, std::size_t shift, Random& random,
                   const std::function<HostBuffer(ElementType, std::size_t, Random&)>& draw = randomBuffer) {
  const int ranks = group.ranks();
  std::vector<HostBuffer> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(draw(type, count, random));
  const std::vector<Expected> expected = expectedResults(inputs, ReduceOp::Sum);
  in.poison();
  if (!inPlace) {
    // No element starts as a right answer (0xFF would be where a NaN is expected).
    HostBuffer poisoned{type, std::vector<std::uint8_t>(shift, 0xFF)};
    const HostBuffer wrong = wrongAnswers(expected, type);
    poisoned.bytes.insert(poisoned.bytes.end(), wrong.bytes.begin(), wrong.bytes.end());
    out.poison();
    for (int r = 0; r < ranks; ++r) out.upload(r, poisoned);
  }
  std::vector<const void*> send;
  std::vector<void*> recv;
  DeviceBuffers& result = inPlace ? in : out;
  for (int r = 0; r < ranks; ++r) {
    HostBuffer shifted{type, std::vector<std::uint8_t>(shift, 0xFF)};
    shifted.bytes.insert(shifted.bytes.end(), inputs[r].bytes.begin(), inputs[r].bytes.end());
    in.upload(r, shifted);
    send.push_back(static_cast<const std::uint8_t*>(in.at(r)) + shift);
    recv.push_back(static_cast<std::uint8_t*>(result.at(r)) + shift);
  }
  std::string why;
  CaseResult outcome;
  const bool launched = group.allReduce(send, recv, count, type, &why, &outcome.ran);
  INFO("not launched: " << why);
  REQUIRE(launched);
  group.synchronize();

  auto downloadShifted = [&](int r) {
    HostBuffer all = result.download(r, type, count + shift / elementBytes(type));
    all.bytes.erase(all.bytes.begin(), all.bytes.begin() + static_cast<long>(shift));
    return all;
  };
  const HostBuffer first = downloadShifted(0);
  outcome.mismatches = countMismatches(expected, first, &outcome.firstMismatch);
  for (int r = 1; r < ranks; ++r) {
    if (downloadShifted(r).bytes != first.bytes) outcome.differingRank = r;
  }
  return outcome;
}

struct Sweep {
  std::vector<Algorithm> algorithms;
  std::vector<std::size_t> sizes;
  CopyMode copy = CopyMode::CopyEngine;
  std::uint64_t seed = 1;
};

void runSweep(const Sweep& sweep) {
  Random random(sweep.seed);
  std::map<Algorithm, int> ran;
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    for (Algorithm algorithm : sweep.algorithms) {
      Config config;
      config.algorithm = algorithm;
      config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
      RankGroup group(kDevice, ranks, configsFor(config, sweep.copy));
      DeviceBuffers in(ranks, kDefaultMaxBytes), out(ranks, kDefaultMaxBytes);
      for (ElementType type : kTypes) {
        for (std::size_t size : sweep.sizes) {
          const std::size_t count = size / elementBytes(type);
          if (count == 0) continue;
          // In place only up to 1 MiB: the larger sizes cost the most host time.
          for (bool inPlace : {false, true}) {
            if (inPlace && size > (1u << 20)) continue;
            const std::size_t bytes = count * elementBytes(type);
            CAPTURE(ranks, algorithmName(algorithm), copyModeName(sweep.copy), elementTypeName(type), bytes, inPlace);
            const CaseResult outcome = runCase(group, in, out, type, count, inPlace, 0, random);
            INFO(outcome.firstMismatch);
            CHECK(outcome.mismatches == 0);
            CHECK(outcome.differingRank == -1);
            CHECK(outcome.ran == expectedAlgorithm(ranks, type, bytes, config));
            ran[outcome.ran]++;
          }
        }
      }
    }
  }
  // The forced kernels really ran (not only their fallbacks).
  for (Algorithm algorithm : sweep.algorithms) {
    CAPTURE(algorithmName(algorithm));
    CHECK(ran[algorithm] > 100);
  }
}

std::vector<std::size_t> allSizes() {
  std::vector<std::size_t> sizes(std::begin(kPackSizes), std::end(kPackSizes));
  sizes.insert(sizes.end(), std::begin(kOddSizes), std::end(kOddSizes));
  return sizes;
}

}  // namespace

// One case per family and copy mode, so that a machine with several GPUs can run them side by side.
TEST_CASE("push kernels match the fp64 reference for every world size, type and size, odd ones included",
          "[gpu][correctness][push]") {
  runSweep({{std::begin(kPush), std::end(kPush)}, allSizes(), CopyMode::CopyEngine, 20261201});
}

TEST_CASE("pull kernels match the fp64 reference; input copied by the copy engine",
          "[gpu][correctness][pull][copy-engine]") {
  runSweep({{std::begin(kPull), std::end(kPull)}, {std::begin(kPackSizes), std::end(kPackSizes)},
            CopyMode::CopyEngine, 20261129});
}

TEST_CASE("pull kernels match the fp64 reference; input copied inside the kernel", "[gpu][correctness][pull][in-kernel]") {
  runSweep({{std::begin(kPull), std::end(kPull)}, {std::begin(kPackSizes), std::end(kPackSizes)},
            CopyMode::InKernel, 20261130});
}

TEST_CASE("pull kernels match the fp64 reference; ranks alternate between the two copies",
          "[gpu][correctness][pull][alternating]") {
  runSweep({{std::begin(kPull), std::end(kPull)}, {std::begin(kPackSizes), std::end(kPackSizes)},
            CopyMode::Alternating, 20261131});
}

// NCCL lets every rank pass any addresses. Every kernel takes them: push kernels and pull
// outputs move unaligned packs byte by byte, an unaligned pull input goes through the copy
// engine. The ranks' buffers are shifted differently, so their alignments disagree.
TEST_CASE("buffers at any alignment, different on every rank, are taken and summed right",
          "[gpu][correctness][unaligned]") {
  Random random(16);
  constexpr int kRanks = 3;
  for (Algorithm algorithm : {Algorithm::OneShotPush, Algorithm::TwoShotPush, Algorithm::OneStage, Algorithm::TwoStage}) {
    for (CopyMode copy : {CopyMode::CopyEngine, CopyMode::Alternating}) {
      Config config;
      config.algorithm = algorithm;
      config.maxBlocks = coResidentBlockLimit(kDevice, kRanks);
      RankGroup group(kDevice, kRanks, configsFor(config, copy));
      DeviceBuffers in(kRanks, 65536 + 64), out(kRanks, 65536 + 64);
      for (ElementType type : kTypes) {
        for (std::size_t bytes : {std::size_t{16}, std::size_t{4096 + 16}, std::size_t{65536}}) {
          for (bool inPlace : {false, true}) {
            const std::size_t shift = static_cast<std::size_t>(elementBytes(type)) * (inPlace ? 3 : 1);
            CAPTURE(algorithmName(algorithm), copyModeName(copy), elementTypeName(type), bytes, inPlace, shift);
            const CaseResult outcome = runCase(group, in, out, type, bytes / elementBytes(type), inPlace, shift, random);
            INFO(outcome.firstMismatch);
            CHECK(outcome.mismatches == 0);
            CHECK(outcome.differingRank == -1);
            CHECK(outcome.ran == algorithm);
          }
        }
      }
    }
  }
}

namespace {

// Inputs full of the values that break naive schemes: -0.0 (the push kernels' sentinel),
// +0.0, NaN, +-inf, denormals of the element type, mixed with ordinary values.
HostBuffer specialBuffer(ElementType type, std::size_t count, Random& random) {
  const double denormal = type == ElementType::Float16 ? 3e-6 : 2e-39;  // below each type's normal range
  const double values[] = {-0.0, -0.0, -0.0, 0.0, NAN, INFINITY, -INFINITY, denormal, -denormal, 0.5, -2.0};
  HostBuffer buffer{type, std::vector<std::uint8_t>(count * elementBytes(type))};
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t pick = random.next() % 16;
    buffer.set(i, pick < 11 ? values[pick] : random.uniform(-1.0, 1.0));
  }
  return buffer;
}

// Every element -0.0 on every rank: the sum is zero (+0.0 from the push kernels).
HostBuffer negativeZeros(ElementType type, std::size_t count, Random&) {
  HostBuffer buffer{type, std::vector<std::uint8_t>(count * elementBytes(type))};
  for (std::size_t i = 0; i < count; ++i) buffer.set(i, -0.0);
  return buffer;
}

}  // namespace

TEST_CASE("-0.0, +0.0, NaN, +-inf and denormals reduce as IEEE sums do, on every kernel",
          "[gpu][correctness][special]") {
  Random random(0x5eed);
  for (int ranks : {2, 3, 8}) {
    for (Algorithm algorithm : {Algorithm::OneShotPush, Algorithm::TwoShotPush, Algorithm::OneStage, Algorithm::TwoStage}) {
      Config config;
      config.algorithm = algorithm;
      config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
      RankGroup group(kDevice, ranks, config);
      DeviceBuffers in(ranks, 1 << 20), out(ranks, 1 << 20);
      for (ElementType type : kTypes) {
        for (std::size_t bytes : {std::size_t{16}, std::size_t{4096}, std::size_t{1} << 20}) {
          for (auto draw : {&specialBuffer, &negativeZeros}) {
            CAPTURE(ranks, algorithmName(algorithm), elementTypeName(type), bytes, draw == &negativeZeros);
            const CaseResult outcome =
                runCase(group, in, out, type, bytes / elementBytes(type), false, 0, random, draw);
            INFO(outcome.firstMismatch);
            CHECK(outcome.mismatches == 0);
            CHECK(outcome.differingRank == -1);
          }
        }
      }
    }
  }
}

TEST_CASE("pull kernels: all 36 blocks per rank where they fit on one GPU", "[gpu][correctness]") {
  Random random(36);
  for (int ranks : {2, 3}) {
    for (Algorithm algorithm : {Algorithm::OneStage, Algorithm::TwoStage}) {
      Config config;
      config.algorithm = algorithm;
      config.pdl = false;
      config.maxBlocks = coResidentBlockLimit(kDevice, ranks, false);
      REQUIRE(config.maxBlocks >= kMaxBlocks);
      RankGroup group(kDevice, ranks, config);
      DeviceBuffers in(ranks, kDefaultMaxBytes), out(ranks, kDefaultMaxBytes);
      for (std::size_t bytes : {std::size_t{36 * 512 * 16 + 16}, kDefaultMaxBytes}) {
        CAPTURE(ranks, algorithmName(algorithm), bytes);
        const CaseResult outcome = runCase(group, in, out, ElementType::BFloat16, bytes / 2, false, 0, random);
        INFO(outcome.firstMismatch);
        CHECK(outcome.mismatches == 0);
        CHECK(outcome.differingRank == -1);
      }
    }
  }
}

// Small enough for compute-sanitizer (memcheck, racecheck, synccheck): run with
// `car_gpu_tests "[sanitizer]"`. Hidden from the default run, which covers it anyway.
TEST_CASE("small case for compute-sanitizer", "[.][sanitizer]") {
  Random random(7);
  for (int ranks : {2, 3}) {
    for (Algorithm algorithm : {Algorithm::OneShotPush, Algorithm::TwoShotPush, Algorithm::OneStage, Algorithm::TwoStage}) {
      for (CopyMode copy : {CopyMode::CopyEngine, CopyMode::Alternating}) {
        Config config;
        config.algorithm = algorithm;
        config.maxBlocks = 2;
        RankGroup group(kDevice, ranks, configsFor(config, copy));
        DeviceBuffers in(ranks, 65536 + 16), out(ranks, 65536 + 16);
        for (std::size_t bytes : {std::size_t{16}, std::size_t{4096 + 48}, std::size_t{65536}}) {
          for (bool inPlace : {false, true}) {
            CAPTURE(ranks, algorithmName(algorithm), copyModeName(copy), bytes, inPlace);
            const CaseResult outcome =
                runCase(group, in, out, ElementType::Float32, bytes / 4, inPlace, inPlace ? 4 : 0, random);
            CHECK(outcome.mismatches == 0);
            CHECK(outcome.differingRank == -1);
          }
        }
      }
    }
  }
}
