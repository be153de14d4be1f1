// Every world size 2..8, both kernels, every type, sizes from 16 bytes to 8 MiB including
// uneven ones, in-place and out-of-place, the input copied by the copy engine, inside the
// kernel, or each way on alternate ranks: against an fp64 reference on fresh random data,
// every output element written, every rank's output bitwise identical.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>

#include "device_buffers.h"
#include "host_data.h"
#include "rank_group.h"

using namespace car;
using namespace car::testing;

namespace {

constexpr int kDevice = 0;
constexpr ElementType kTypes[] = {ElementType::Float16, ElementType::BFloat16, ElementType::Float32};

// Packs counts that are not multiples of the world size or of 512 threads, the edges of
// the seed's algorithm thresholds, and the 8 MiB maximum itself.
const std::size_t kSizesBytes[] = {
    16,          48,           1008,         4096 + 16,       65536 + 48,
    262144 - 16, 262144,       524288 + 80,  1048576 + 112,   4194304 - 48,
    8388608,
};

// Who copies each rank's input into its staging. Eager calls up to copyInKernelBytes copy
// inside the kernel; the ranks of one call need not agree.
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

struct CaseResult {
  std::size_t mismatches = 0;
  std::string firstMismatch;
  int differingRank = -1;  // a rank whose output differs from rank 0's bits
};

CaseResult runCase(RankGroup& group, DeviceBuffers& in, DeviceBuffers& out, ElementType type,
                   std::size_t bytes, bool inPlace, Random& random) {
  const int ranks = group.ranks();
  const std::size_t count = bytes / elementBytes(type);
  std::vector<HostBuffer> inputs;
  out.poison();
  for (int r = 0; r < ranks; ++r) {
    inputs.push_back(randomBuffer(type, count, random));
    in.upload(r, inputs.back());
  }
  DeviceBuffers& result = inPlace ? in : out;
  std::string why;
  const bool launched = group.allReduce(in.constPointers(), result.pointers(), count, type, &why);
  INFO("not launched: " << why);
  REQUIRE(launched);
  group.synchronize();

  CaseResult outcome;
  const HostBuffer first = result.download(0, type, count);
  outcome.mismatches = countMismatches(inputs, first, &outcome.firstMismatch);
  for (int r = 1; r < ranks; ++r) {
    if (result.download(r, type, count).bytes != first.bytes) outcome.differingRank = r;
  }
  return outcome;
}

void checkEveryWorldSizeKernelTypeAndSize(CopyMode copy, std::uint64_t seed) {
  Random random(seed);
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    for (AlgorithmOverride algorithm : {AlgorithmOverride::OneStage, AlgorithmOverride::TwoStage}) {
      Config config;
      config.algorithm = algorithm;
      config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
      RankGroup group(kDevice, ranks, configsFor(config, copy));
      DeviceBuffers in(ranks, kDefaultMaxBytes), out(ranks, kDefaultMaxBytes);
      for (ElementType type : kTypes) {
        for (std::size_t bytes : kSizesBytes) {
          for (bool inPlace : {false, true}) {
            CAPTURE(ranks, overrideName(algorithm), copyModeName(copy), elementTypeName(type), bytes, inPlace);
            const CaseResult outcome = runCase(group, in, out, type, bytes, inPlace, random);
            INFO(outcome.firstMismatch);
            CHECK(outcome.mismatches == 0);
            CHECK(outcome.differingRank == -1);
          }
        }
      }
    }
  }
}

}  // namespace

// One case per copy mode, so that a machine with several GPUs can run them side by side.
TEST_CASE("all-reduce matches the fp64 reference for every world size, kernel, type and size; "
          "input copied by the copy engine", "[gpu][correctness][copy-engine]") {
  checkEveryWorldSizeKernelTypeAndSize(CopyMode::CopyEngine, 20261129);
}

TEST_CASE("all-reduce matches the fp64 reference for every world size, kernel, type and size; "
          "input copied inside the kernel", "[gpu][correctness][in-kernel]") {
  checkEveryWorldSizeKernelTypeAndSize(CopyMode::InKernel, 20261130);
}

TEST_CASE("all-reduce matches the fp64 reference for every world size, kernel, type and size; "
          "ranks alternate between the two copies", "[gpu][correctness][alternating]") {
  checkEveryWorldSizeKernelTypeAndSize(CopyMode::Alternating, 20261131);
}

// NCCL lets every rank pass any input address; only the output must be 16-byte aligned for
// us. An input one element off alignment is still taken: the copy engine copies it, also
// when the rank would copy small inputs inside the kernel.
TEST_CASE("an input that is not 16-byte aligned is taken and summed right", "[gpu][correctness][unaligned-input]") {
  Random random(16);
  constexpr int kRanks = 3;
  for (AlgorithmOverride algorithm : {AlgorithmOverride::OneStage, AlgorithmOverride::TwoStage}) {
    for (CopyMode copy : {CopyMode::CopyEngine, CopyMode::InKernel, CopyMode::Alternating}) {
      Config config;
      config.algorithm = algorithm;
      config.maxBlocks = coResidentBlockLimit(kDevice, kRanks);
      RankGroup group(kDevice, kRanks, configsFor(config, copy));
      DeviceBuffers in(kRanks, 65536 + 16), out(kRanks, 65536);
      for (ElementType type : kTypes) {
        for (std::size_t bytes : {std::size_t{16}, std::size_t{4096 + 16}, std::size_t{65536}}) {
          CAPTURE(overrideName(algorithm), copyModeName(copy), elementTypeName(type), bytes);
          const std::size_t shift = static_cast<std::size_t>(elementBytes(type));
          const std::size_t count = bytes / shift;
          std::vector<HostBuffer> inputs;
          std::vector<const void*> send;
          for (int r = 0; r < kRanks; ++r) {
            inputs.push_back(randomBuffer(type, count, random));
            HostBuffer shifted{type, std::vector<std::uint8_t>(shift, 0)};
            shifted.bytes.insert(shifted.bytes.end(), inputs.back().bytes.begin(), inputs.back().bytes.end());
            in.upload(r, shifted);
            send.push_back(static_cast<const std::uint8_t*>(in.at(r)) + shift);
          }
          out.poison();
          std::string why;
          const bool launched = group.allReduce(send, out.pointers(), count, type, &why);
          INFO("not launched: " << why);
          REQUIRE(launched);
          group.synchronize();
          std::string firstMismatch;
          const HostBuffer first = out.download(0, type, count);
          const std::size_t mismatches = countMismatches(inputs, first, &firstMismatch);
          INFO(firstMismatch);
          CHECK(mismatches == 0);
          for (int r = 1; r < kRanks; ++r) CHECK(out.download(r, type, count).bytes == first.bytes);
        }
      }
    }
  }
}

TEST_CASE("all 36 blocks per rank where they fit on one GPU", "[gpu][correctness]") {
  Random random(36);
  for (int ranks : {2, 3}) {
    for (AlgorithmOverride algorithm : {AlgorithmOverride::OneStage, AlgorithmOverride::TwoStage}) {
      Config config;
      config.algorithm = algorithm;
      config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
      REQUIRE(config.maxBlocks == kMaxBlocks);
      RankGroup group(kDevice, ranks, config);
      DeviceBuffers in(ranks, kDefaultMaxBytes), out(ranks, kDefaultMaxBytes);
      for (std::size_t bytes : {std::size_t{36 * 512 * 16 + 16}, kDefaultMaxBytes}) {
        CAPTURE(ranks, overrideName(algorithm), bytes);
        const CaseResult outcome = runCase(group, in, out, ElementType::BFloat16, bytes, false, random);
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
    for (AlgorithmOverride algorithm : {AlgorithmOverride::OneStage, AlgorithmOverride::TwoStage}) {
      for (CopyMode copy : {CopyMode::CopyEngine, CopyMode::Alternating}) {
        Config config;
        config.algorithm = algorithm;
        config.maxBlocks = 2;
        RankGroup group(kDevice, ranks, configsFor(config, copy));
        DeviceBuffers in(ranks, 65536), out(ranks, 65536);
        for (std::size_t bytes : {std::size_t{16}, std::size_t{4096 + 48}, std::size_t{65536}}) {
          for (bool inPlace : {false, true}) {
            CAPTURE(ranks, overrideName(algorithm), copyModeName(copy), bytes, inPlace);
            const CaseResult outcome = runCase(group, in, out, ElementType::Float32, bytes, inPlace, random);
            CHECK(outcome.mismatches == 0);
            CHECK(outcome.differingRank == -1);
          }
        }
      }
    }
  }
}
