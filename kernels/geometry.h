// Launch geometry shared by the host (policy, tests) and the kernels: how many blocks a call
// gets and which packs each rank owns in the 2stage kernel. One definition for both sides,
// so the CPU tests check the very arithmetic the kernels run.
#pragma once

#include <cstddef>

#include "rank_signal.h"

#if defined(__CUDACC__)
#define CAR_HOST_DEVICE __host__ __device__
#else
#define CAR_HOST_DEVICE
#endif

namespace car {

// Blocks for a call of `packs` 16-byte packs: enough for one pack per thread, at most
// maxBlocks. Every rank computes the same value for the same call, which the barrier
// needs: block b of one rank pairs with block b of every peer.
CAR_HOST_DEVICE constexpr int gridBlocks(long long packs, int maxBlocks) {
  long long wanted = (packs + kThreadsPerBlock - 1) / kThreadsPerBlock;
  if (wanted < 1) wanted = 1;
  return wanted < maxBlocks ? static_cast<int>(wanted) : maxBlocks;
}

// The 2stage shard of `rank`: packs [begin, end). Rank r owns an equal part; the last rank
// also takes the remainder, so every pack has exactly one owner.
struct Shard {
  long long begin;
  long long end;
};

CAR_HOST_DEVICE constexpr long long shardPart(long long packs, int ranks) { return packs / ranks; }

CAR_HOST_DEVICE constexpr long long largestShard(long long packs, int ranks) {
  return packs / ranks + packs % ranks;
}

CAR_HOST_DEVICE constexpr Shard shardOf(long long packs, int ranks, int rank) {
  long long part = shardPart(packs, ranks);
  long long begin = rank * part;
  long long end = (rank == ranks - 1) ? packs : begin + part;
  return Shard{begin, end};
}

}  // namespace car
