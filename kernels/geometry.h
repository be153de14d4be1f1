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
#if defined(__CUDA_ARCH__)
#define CAR_UNROLL _Pragma("unroll")
#else
#define CAR_UNROLL
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

// Which packs thread `thread` of a grid of `stride` threads handles in each step of the 2stage
// kernel: shard offsets thread, thread + stride, ... of every shard, in every step. The kernel
// runs these walks and the CPU tests replay them. Two things rest on the mapping being the
// same in every step (tests/cpu/test_geometry.cc checks both):
// - the barrier between the stages is per block, so the gather may read offset j of a peer's
//   shard only in the block that reduced offset j on that peer;
// - in place, the packs a block writes into the output in stage 2 are exactly those it copied
//   into staging at the entry, so no block overwrites input that another has yet to copy.

// The entry copy: visit(pack) for every message pack this thread copies into staging, shard
// by shard, each at this thread's offsets.
template <int kRanks, typename Visit>
CAR_HOST_DEVICE inline void twoStageCopyWalk(long long packs, long long thread, long long stride, Visit&& visit) {
  CAR_UNROLL
  for (int s = 0; s < kRanks; ++s) {
    const Shard shard = shardOf(packs, kRanks, s);
    for (long long j = thread; shard.begin + j < shard.end; j += stride) visit(shard.begin + j);
  }
}

// Stage 1: visit(offset) for every offset of `rank`'s shard this thread reduces (message pack
// shardOf(packs, kRanks, rank).begin + offset).
template <int kRanks, typename Visit>
CAR_HOST_DEVICE inline void twoStageReduceWalk(long long packs, int rank, long long thread, long long stride,
                                               Visit&& visit) {
  const Shard mine = shardOf(packs, kRanks, rank);
  for (long long j = thread; mine.begin + j < mine.end; j += stride) visit(j);
}

// Stage 2: visit(i, offset, pack) for every pack this thread gathers: offset `offset` of the
// shard of source i (rank (rank + i) % kRanks, the kernel's rotated order), which is message
// pack `pack`.
template <int kRanks, typename Visit>
CAR_HOST_DEVICE inline void twoStageGatherWalk(long long packs, int rank, long long thread, long long stride,
                                               Visit&& visit) {
  const long long part = shardPart(packs, kRanks);
  const long long largest = largestShard(packs, kRanks);
  for (long long j = thread; j < largest; j += stride) {
    CAR_UNROLL
    for (int i = 0; i < kRanks; ++i) {
      const int from = (rank + i) % kRanks;
      if (j < part || from == kRanks - 1) visit(i, j, from * part + j);
    }
  }
}

// ---- The push kernels (1shot, 2shot) ----------------------------------------------------
// No barrier pairs their blocks across ranks: each pack carries its own "arrived" mark (the
// sentinel), so a rank's grid is its own business. Only the offsets inside an area must
// agree, and they depend on the message and the world size alone.

// Packs of a message of `bytes` bytes; a last partial pack is padded with zeros.
CAR_HOST_DEVICE constexpr long long packsOf(long long bytes) {
  return (bytes + static_cast<long long>(kPackBytes) - 1) / static_cast<long long>(kPackBytes);
}

// Threads per block for `work` packs per rank, as the grid would have them with no cap. A
// block's pushes leave its multiprocessor at a limited rate, so the time of a call grows
// with the bytes per block rather than with the message: up to 256 KiB per rank the packs
// are spread over blocks of 128 threads, one pack per thread (4 KiB takes 2 blocks, 16 KiB
// 8, 256 KiB 128). Above that, where the links rather than the blocks are the limit, full
// blocks for 1shot and half ones for 2shot, up to kMaxPushBlocks of them (the figures
// behind both shapes: docs/benchmarks.md).
constexpr int kSmallPushBlockThreads = 128;
constexpr long long kSmallPushWorkUpTo = 16384;  // packs per rank
constexpr int kLargeOneShotBlockThreads = kThreadsPerBlock;
constexpr int kLargeTwoShotBlockThreads = kThreadsPerBlock / 2;

CAR_HOST_DEVICE constexpr int pushThreadsPerBlock(long long work, bool twoShot) {
  if (work <= kSmallPushWorkUpTo) return kSmallPushBlockThreads;
  return twoShot ? kLargeTwoShotBlockThreads : kLargeOneShotBlockThreads;
}

// The most blocks a push call of a type with `wirePacks` wire packs per pack may use: split
// packs (integers, fp64) travel as two wire packs each, and for them fewer, wider blocks are
// the faster shape (docs/benchmarks.md has the figures).
CAR_HOST_DEVICE constexpr int pushBlockLimit(int wirePacks) {
  return wirePacks > 1 ? kMaxPushBlocks / 2 : kMaxPushBlocks;
}

// Blocks for `work` packs per rank: one pack per thread of pushThreadsPerBlock, at least one
// block, at most maxBlocks (the caller's limit, itself at most kMaxPushBlocks); beyond that
// the kernels' loops stride over the rest.
CAR_HOST_DEVICE constexpr int pushGridBlocks(long long work, bool twoShot, int maxBlocks) {
  const int limit = maxBlocks < kMaxPushBlocks ? maxBlocks : kMaxPushBlocks;
  const long long perBlock = pushThreadsPerBlock(work, twoShot);
  long long wanted = (work + perBlock - 1) / perBlock;
  if (wanted < 1) wanted = 1;
  return wanted < limit ? static_cast<int>(wanted) : limit;
}

// Threads per block for a grid of `blocks`: one pack per thread as far as the width allows.
// With pushGridBlocks' own count that is at most pushThreadsPerBlock (a lone small block gets
// only the warps its packs need: small calls are dominated by the launch and the spin). Where
// a cap left fewer blocks (several ranks sharing one GPU, NCCL_CAR_MAX_BLOCKS), the blocks
// widen up to kThreadsPerBlock instead of striding: a thread that strides issues its pushes
// one after another, where wider blocks issue them side by side (at 8 ranks on one GPU wider
// blocks nearly halve the time, docs/benchmarks.md). With every block in use, the threads
// stay pushThreadsPerBlock and stride.
CAR_HOST_DEVICE constexpr int pushBlockThreads(long long work, bool twoShot, int blocks) {
  const long long perBlock = (work + blocks - 1) / blocks;
  long long threads = (perBlock + 31) / 32 * 32;
  const long long widest = blocks >= kMaxPushBlocks ? pushThreadsPerBlock(work, twoShot) : kThreadsPerBlock;
  if (threads > widest) threads = widest;
  return threads < 32 ? 32 : static_cast<int>(threads);
}

// 1shot: rank r's whole message goes into slot r of every peer's area.
CAR_HOST_DEVICE constexpr long long oneShotSlotPacks(long long packs) { return packs; }
CAR_HOST_DEVICE constexpr std::size_t oneShotAreaUse(long long packs, int ranks) {
  return static_cast<std::size_t>(ranks) * static_cast<std::size_t>(packs) * kPackBytes;
}

// 2shot: shard j is packs [j * S, min((j + 1) * S, packs)) with S = ceil(packs / ranks) (the
// last shards may be short or empty). The area holds a scatter region (slot r: rank r's
// copy of our shard) and a gather region (slot j: shard j reduced by its owner), each
// ranks x S packs.
CAR_HOST_DEVICE constexpr long long twoShotShardPacks(long long packs, int ranks) {
  return (packs + ranks - 1) / ranks;
}
CAR_HOST_DEVICE constexpr std::size_t twoShotAreaUse(long long packs, int ranks) {
  return 2 * static_cast<std::size_t>(ranks) * static_cast<std::size_t>(twoShotShardPacks(packs, ranks)) *
         kPackBytes;
}

}  // namespace car
