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

// The NCCL collectives a kernel may serve. Each call's `count` is NCCL's: all-reduce, the
// elements of the message; all-gather, each rank's part (sendcount); reduce-scatter, each
// rank's result (recvcount).
enum class Collective { AllReduce, AllGather, ReduceScatter, kCount };

constexpr int kCollectiveCount = static_cast<int>(Collective::kCount);

// "all-reduce", "all-gather", "reduce-scatter": part of the log format (TRACE lines) and of
// nccl_car_query's answers.
constexpr const char* collectiveName(Collective collective) {
  switch (collective) {
    case Collective::AllReduce: return "all-reduce";
    case Collective::AllGather: return "all-gather";
    case Collective::ReduceScatter: return "reduce-scatter";
    case Collective::kCount: break;
  }
  return "?";
}

// Whether the collective reduces (takes an op) or only moves its data.
constexpr bool reduces(Collective collective) { return collective != Collective::AllGather; }

constexpr std::uint32_t collectiveBit(Collective collective) { return 1u << static_cast<int>(collective); }

// Pull kernels read the peers' staging copies behind barriers; push kernels write into the
// peers' receive areas and wait for nothing but the data itself (docs/design.md).
enum class KernelFamily { Pull, Push };

enum class Algorithm {
  OneStage,
  TwoStage,
  OneShotPush,
  TwoShotPush,
  AllGatherPush,
  ReduceScatterPush,
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
  // Push kernels that only move data (all-gather): its bits must arrive unchanged, so every
  // type travels split, like the integers (wirePacksOf, all_reduce.h), never made
  // sentinel-free (which turns a -0.0 into +0.0).
  bool copiesBits;
  std::uint32_t collectives;  // collectiveBit of each collective it serves
};

// In Algorithm's order (checked below).
inline constexpr AlgorithmSpec kAlgorithms[] = {
    // Every rank reduces everything: 2 barriers.
    {Algorithm::OneStage, "1stage", KernelFamily::Pull, nullptr, false, false, collectiveBit(Collective::AllReduce)},
    // Reduce-scatter, then all-gather: 3 barriers.
    {Algorithm::TwoStage, "2stage", KernelFamily::Pull, nullptr, false, false, collectiveBit(Collective::AllReduce)},
    // Every input to every rank, each reduces everything: no barrier.
    {Algorithm::OneShotPush, "1shot", KernelFamily::Push, &oneShotAreaUse, false, false,
     collectiveBit(Collective::AllReduce)},
    // Shards to their owners, each owner pushes its reduced shard to all.
    {Algorithm::TwoShotPush, "2shot", KernelFamily::Push, &twoShotAreaUse, true, false,
     collectiveBit(Collective::AllReduce)},
    // Each rank's part into slot `rank` of every peer's area, as 1shot pushes its input: a
    // message is one rank's part.
    {Algorithm::AllGatherPush, "allgather", KernelFamily::Push, &oneShotAreaUse, false, true,
     collectiveBit(Collective::AllGather)},
    // Part j of each rank's input into slot `rank` of rank j's area, which reduces it: 2shot's
    // first half, a message being one rank's result.
    {Algorithm::ReduceScatterPush, "reducescatter", KernelFamily::Push, &oneShotAreaUse, false, false,
     collectiveBit(Collective::ReduceScatter)},
};

constexpr bool rowsFollowTheEnum() {
  if (sizeof(kAlgorithms) / sizeof(kAlgorithms[0]) != static_cast<std::size_t>(kAlgorithmCount)) return false;
  for (int a = 0; a < kAlgorithmCount; ++a) {
    const AlgorithmSpec& row = kAlgorithms[a];
    if (row.algorithm != static_cast<Algorithm>(a)) return false;
    if ((row.family == KernelFamily::Push) != (row.areaUse != nullptr)) return false;
    if ((row.shardedWork || row.copiesBits) && row.family != KernelFamily::Push) return false;
    if (row.collectives == 0) return false;
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

// The collective a kernel serves (each serves one).
constexpr Collective collectiveOf(Algorithm algorithm) {
  for (int c = 0; c < kCollectiveCount; ++c) {
    if (serves(algorithm, static_cast<Collective>(c))) return static_cast<Collective>(c);
  }
  return Collective::kCount;
}

constexpr bool eachServesOne() {
  for (const AlgorithmSpec& row : kAlgorithms) {
    if ((row.collectives & (row.collectives - 1)) != 0) return false;
  }
  return true;
}
static_assert(eachServesOne(), "kAlgorithms: each kernel serves one collective (collectiveOf)");

// The all-reduce's kernels are the table's first rows: NCCL_CAR_ALGO chooses among them
// (Algorithm values 0 .. kAllReduceAlgorithmCount - 1).
constexpr int allReduceRows() {
  int rows = 0;
  while (rows < kAlgorithmCount && serves(static_cast<Algorithm>(rows), Collective::AllReduce)) ++rows;
  for (int a = rows; a < kAlgorithmCount; ++a) {
    if (serves(static_cast<Algorithm>(a), Collective::AllReduce)) return -1;
  }
  return rows;
}
constexpr int kAllReduceAlgorithmCount = allReduceRows();
static_assert(kAllReduceAlgorithmCount > 0, "kAlgorithms: the all-reduce's kernels come first");

}  // namespace car
