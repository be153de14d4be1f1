// The one table of our kernels. Each row says what host code needs to know of one algorithm:
// its name (logs, NCCL_CAR_ALGO, nccl_car_query), its family, how much of a receive area a
// message takes, and which collectives it serves. Everything else derives from the rows: the
// setting's choices, the counters and their order in the `released:` line, which kernels
// need the pull buffers, whether a message fits. A new kernel is one enumerator and one row
// here, its kernel file with its getter (dispatch.cuh, dispatch.cu), and the place in the
// policy's rule where it is chosen (plugin/policy.cc). Host code only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "geometry.h"

namespace car {

// The NCCL collectives a kernel may serve.
enum class Collective { AllReduce, kCount };

constexpr int kCollectiveCount = static_cast<int>(Collective::kCount);

constexpr std::uint32_t collectiveBit(Collective collective) { return 1u << static_cast<int>(collective); }

// Pull kernels read the peers' staging copies behind barriers; push kernels write into the
// peers' receive areas and wait for nothing but the data itself (docs/design.md).
enum class KernelFamily { Pull, Push };

enum class Algorithm {
  OneStage,
  TwoStage,
  OneShotPush,
  TwoShotPush,
  kCount,
};

constexpr int kAlgorithmCount = static_cast<int>(Algorithm::kCount);

struct AlgorithmSpec {
  Algorithm algorithm;
  const char* name;  // part of the log format and of NCCL_CAR_ALGO: never renamed
  KernelFamily family;
  // Push kernels: bytes of one receive area that a message of `packs` packs takes with
  // `ranks` ranks, for types whose packs travel as they are (times wirePacksPerPack
  // otherwise). Null for pull kernels: they stage the message in their own buffers.
  std::size_t (*areaUse)(long long packs, int ranks);
  // Push kernels: each rank works on its shard of the message, not on all of it, and its
  // grid is sized by that shard (geometry.h).
  bool shardedWork;
  std::uint32_t collectives;  // collectiveBit of each collective it serves
};

// In Algorithm's order (checked below).
inline constexpr AlgorithmSpec kAlgorithms[] = {
    // Every rank reduces everything: 2 barriers.
    {Algorithm::OneStage, "1stage", KernelFamily::Pull, nullptr, false, collectiveBit(Collective::AllReduce)},
    // Reduce-scatter, then all-gather: 3 barriers.
    {Algorithm::TwoStage, "2stage", KernelFamily::Pull, nullptr, false, collectiveBit(Collective::AllReduce)},
    // Every input to every rank, each reduces everything: no barrier.
    {Algorithm::OneShotPush, "1shot", KernelFamily::Push, &oneShotAreaUse, false,
     collectiveBit(Collective::AllReduce)},
    // Shards to their owners, each owner pushes its reduced shard to all.
    {Algorithm::TwoShotPush, "2shot", KernelFamily::Push, &twoShotAreaUse, true,
     collectiveBit(Collective::AllReduce)},
};

constexpr bool rowsFollowTheEnum() {
  if (sizeof(kAlgorithms) / sizeof(kAlgorithms[0]) != static_cast<std::size_t>(kAlgorithmCount)) return false;
  for (int a = 0; a < kAlgorithmCount; ++a) {
    const AlgorithmSpec& row = kAlgorithms[a];
    if (row.algorithm != static_cast<Algorithm>(a)) return false;
    if ((row.family == KernelFamily::Push) != (row.areaUse != nullptr)) return false;
    if (row.shardedWork && row.family != KernelFamily::Push) return false;
  }
  return true;
}
static_assert(rowsFollowTheEnum(),
              "kAlgorithms: one row per Algorithm in its order; push kernels, and only they, use an area");

constexpr const AlgorithmSpec& specOf(Algorithm algorithm) { return kAlgorithms[static_cast<int>(algorithm)]; }

// "?" for kCount, which tests use for "none ran".
constexpr const char* algorithmName(Algorithm algorithm) {
  return algorithm >= Algorithm::OneStage && algorithm < Algorithm::kCount ? specOf(algorithm).name : "?";
}

constexpr bool isPush(Algorithm algorithm) { return specOf(algorithm).family == KernelFamily::Push; }

constexpr bool serves(Algorithm algorithm, Collective collective) {
  return (specOf(algorithm).collectives & collectiveBit(collective)) != 0;
}

}  // namespace car
