// Grid size and the 2stage partition, simulated on the host with the very functions the
// kernels use (geometry.h), the 2stage kernel's walks included.
#include <catch2/catch.hpp>

#include <utility>
#include <vector>

#include "geometry.h"

using namespace car;

TEST_CASE("grid: one pack per thread, at least one block, at most maxBlocks", "[geometry]") {
  CHECK(gridBlocks(1, 36) == 1);
  CHECK(gridBlocks(512, 36) == 1);
  CHECK(gridBlocks(513, 36) == 2);
  CHECK(gridBlocks(1024, 36) == 2);        // 16 KiB message
  CHECK(gridBlocks(36 * 512, 36) == 36);
  CHECK(gridBlocks(36 * 512 + 1, 36) == 36);
  CHECK(gridBlocks(524288, 36) == 36);     // 8 MiB message
  CHECK(gridBlocks(524288, 16) == 16);
  CHECK(gridBlocks(0, 36) == 1);
}

namespace {

// Replays the 2stage kernel's three walks (geometry.h, the very functions the kernel runs) for
// every thread of every rank, and records who handles each pack: how often, and in which block.
struct TwoStageTrace {
  std::vector<std::vector<int>> copied;     // [rank][pack]: times copied into staging
  std::vector<int> reduced;                 // [pack]: times reduced, over all ranks
  std::vector<std::vector<int>> gathered;   // [rank][pack]: times written into the output
  int misplaced = 0;        // a gathered offset written to another pack than the one it holds
  int unpublished = 0;      // a gathered offset that no block of the same index reduced
  int overwrittenEarly = 0;  // an output pack written by another block than the one that copied it
};

template <int kRanks>
TwoStageTrace traceTwoStage(long long packs, int blocks) {
  TwoStageTrace t;
  t.copied.assign(kRanks, std::vector<int>(packs, 0));
  t.reduced.assign(packs, 0);
  t.gathered.assign(kRanks, std::vector<int>(packs, 0));
  const long long stride = static_cast<long long>(blocks) * kThreadsPerBlock;
  std::vector<std::vector<long long>> copyBlock(kRanks, std::vector<long long>(packs, -1));
  std::vector<std::vector<long long>> reduceBlock(kRanks, std::vector<long long>(packs, -1));  // [rank][offset]
  for (int rank = 0; rank < kRanks; ++rank) {
    const long long first = shardOf(packs, kRanks, rank).begin;
    for (long long thread = 0; thread < stride; ++thread) {
      const long long block = thread / kThreadsPerBlock;
      twoStageCopyWalk<kRanks>(packs, thread, stride, [&](long long pack) {
        t.copied[rank][pack]++;
        copyBlock[rank][pack] = block;
      });
      twoStageReduceWalk<kRanks>(packs, rank, thread, stride, [&](long long offset) {
        t.reduced[first + offset]++;
        reduceBlock[rank][offset] = block;
      });
    }
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    for (long long thread = 0; thread < stride; ++thread) {
      const long long block = thread / kThreadsPerBlock;
      twoStageGatherWalk<kRanks>(packs, rank, thread, stride, [&](int i, long long offset, long long pack) {
        const int from = (rank + i) % kRanks;
        t.gathered[rank][pack]++;
        t.misplaced += pack != shardOf(packs, kRanks, from).begin + offset;
        t.unpublished += reduceBlock[from][offset] != block;
        t.overwrittenEarly += copyBlock[rank][pack] != block;
      });
    }
  }
  return t;
}

template <int kRanks>
void checkTwoStage() {
  // Counts below the world size, not divisible by it, and spanning several grid strides;
  // grids of the policy's size and smaller ones (a cap), which stride more.
  for (long long packs : {1LL, 2LL, 7LL, 8LL, 9LL, 513LL, 1023LL, 4097LL, 36LL * 512 * 3 + 5}) {
    for (int blocks : {gridBlocks(packs, kMaxBlocks), 1, 3}) {
      CAPTURE(kRanks, packs, blocks);
      const TwoStageTrace t = traceTwoStage<kRanks>(packs, blocks);
      CHECK(t.misplaced == 0);
      CHECK(t.unpublished == 0);
      CHECK(t.overwrittenEarly == 0);
      for (long long p = 0; p < packs; ++p) {
        REQUIRE(t.reduced[p] == 1);
        for (int rank = 0; rank < kRanks; ++rank) {
          REQUIRE(t.copied[rank][p] == 1);
          REQUIRE(t.gathered[rank][p] == 1);
        }
      }
    }
  }
}

template <int... kWorldSizes>
void checkTwoStageAt(std::integer_sequence<int, kWorldSizes...>) {
  (checkTwoStage<kWorldSizes + 2>(), ...);
}

}  // namespace

TEST_CASE("2stage: every pack copied, reduced by one owner and gathered once, each by the block the barrier "
          "orders", "[geometry]") {
  static_assert(kMaxRanks >= 2);
  checkTwoStageAt(std::make_integer_sequence<int, kMaxRanks - 1>{});
}

TEST_CASE("2stage shards: the last rank takes the remainder", "[geometry]") {
  CHECK(shardOf(10, 4, 0).begin == 0);
  CHECK(shardOf(10, 4, 0).end == 2);
  CHECK(shardOf(10, 4, 2).begin == 4);
  CHECK(shardOf(10, 4, 2).end == 6);
  CHECK(shardOf(10, 4, 3).begin == 6);
  CHECK(shardOf(10, 4, 3).end == 10);
  CHECK(largestShard(10, 4) == 4);
  CHECK(shardOf(3, 8, 7).begin == 0);
  CHECK(shardOf(3, 8, 7).end == 3);
  CHECK(shardOf(3, 8, 0).end == 0);
}

TEST_CASE("buffer block layout: Signal, PushState, tmp and staging, then three push areas", "[geometry]") {
  const BlockLayout layout = layoutFor(8 << 20, 8 << 20);
  CHECK(layout.pushStateOffset >= sizeof(Signal));
  CHECK(layout.tmpOffset >= layout.pushStateOffset + sizeof(PushState));
  for (std::size_t offset : {layout.pushStateOffset, layout.tmpOffset, layout.stagingOffset, layout.areasOffset,
                             layout.areaBytes}) {
    CHECK(offset % 256 == 0);
  }
  CHECK(layout.stagingOffset == layout.tmpOffset + (8 << 20));
  CHECK(layout.areasOffset == layout.stagingOffset + (8 << 20));
  CHECK(layout.areaBytes == pushAreaBytesFor(8 << 20));
  CHECK(layout.totalBytes == layout.areasOffset + 3 * layout.areaBytes);
  CHECK(sizeof(Signal) == 128 * ((kMaxBlocks * kMaxRanks * 4 + 127) / 128) + 2 * kMaxBlocks * kMaxRanks * 4);
  // The push kernels off: no areas at all.
  const BlockLayout pullOnly = layoutFor(8 << 20, 0);
  CHECK(pullOnly.areaBytes == 0);
  CHECK(pullOnly.totalBytes == pullOnly.areasOffset);
}

TEST_CASE("push grid: one pack per thread, small blocks up to 256 KiB per rank, a lone block only as wide as "
          "its packs", "[geometry]") {
  constexpr bool k1shot = false;
  constexpr bool k2shot = true;
  CHECK(pushThreadsPerBlock(1, k1shot) == kSmallPushBlockThreads);
  CHECK(pushThreadsPerBlock(kSmallPushWorkUpTo, k2shot) == kSmallPushBlockThreads);
  CHECK(pushThreadsPerBlock(kSmallPushWorkUpTo + 1, k1shot) == kThreadsPerBlock);
  CHECK(pushThreadsPerBlock(kSmallPushWorkUpTo + 1, k2shot) == kThreadsPerBlock / 2);
  CHECK(pushGridBlocks(1, k1shot, kMaxPushBlocks) == 1);
  CHECK(pushGridBlocks(64, k1shot, kMaxPushBlocks) == 1);          // 1 KiB, 1shot
  CHECK(pushGridBlocks(128, k1shot, kMaxPushBlocks) == 1);
  CHECK(pushGridBlocks(129, k1shot, kMaxPushBlocks) == 2);
  CHECK(pushGridBlocks(256, k1shot, kMaxPushBlocks) == 2);         // 4 KiB
  CHECK(pushGridBlocks(1024, k1shot, kMaxPushBlocks) == 8);        // 16 KiB
  CHECK(pushGridBlocks(4096, k1shot, kMaxPushBlocks) == 32);       // 64 KiB
  CHECK(pushGridBlocks(16384, k1shot, kMaxPushBlocks) == 128);     // 256 KiB
  CHECK(pushGridBlocks(16385, k1shot, kMaxPushBlocks) == 33);      // full blocks from here
  CHECK(pushGridBlocks(65536, k1shot, kMaxPushBlocks) == 128);     // 1 MiB, 1shot
  CHECK(pushGridBlocks(131072, k1shot, kMaxPushBlocks) == 256);    // 2 MiB, 1shot
  CHECK(pushGridBlocks(131072, k2shot, kMaxPushBlocks) == 256);    // 4 MiB at 2 ranks, 2shot
  CHECK(pushGridBlocks(1024, k1shot, 4) == 4);                     // the caller's cap
  CHECK(pushGridBlocks(65536, k1shot, 16) == 16);
  CHECK(pushGridBlocks(1 << 20, k1shot, 1000) == kMaxPushBlocks);
  CHECK(pushBlockThreads(1, k1shot, 1) == 32);
  CHECK(pushBlockThreads(64, k1shot, 1) == 64);                    // 1 KiB
  CHECK(pushBlockThreads(65, k1shot, 1) == 96);
  CHECK(pushBlockThreads(128, k1shot, 1) == 128);
  CHECK(pushBlockThreads(129, k1shot, 2) == 96);
  CHECK(pushBlockThreads(256, k1shot, 2) == kSmallPushBlockThreads);   // 4 KiB
  CHECK(pushBlockThreads(1024, k1shot, 8) == kSmallPushBlockThreads);  // 16 KiB
  CHECK(pushBlockThreads(16384, k1shot, 128) == kSmallPushBlockThreads);
  CHECK(pushBlockThreads(1024, k1shot, 1) == kThreadsPerBlock);        // capped: the block widens
  CHECK(pushBlockThreads(4096, k1shot, 8) == kThreadsPerBlock);        // 64 KiB, 8 ranks on one GPU
  CHECK(pushBlockThreads(2048, k2shot, 8) == 256);
  CHECK(pushBlockThreads(65536, k1shot, 128) == kThreadsPerBlock);
  CHECK(pushBlockThreads(131072, k1shot, kMaxPushBlocks) == kThreadsPerBlock);
  CHECK(pushBlockThreads(262144, k2shot, kMaxPushBlocks) == kThreadsPerBlock / 2);  // 8 MiB at 2 ranks: strides
  CHECK(pushBlockThreads(1 << 20, k1shot, kMaxPushBlocks) == kThreadsPerBlock);
  // Split packs: at most half the blocks, which then widen to full blocks.
  CHECK(pushBlockLimit(1) == kMaxPushBlocks);
  CHECK(pushBlockLimit(2) == kMaxPushBlocks / 2);
  CHECK(pushGridBlocks(65536, k2shot, pushBlockLimit(2)) == kMaxPushBlocks / 2);  // int32 2 MiB at 2 ranks
  CHECK(pushBlockThreads(65536, k2shot, kMaxPushBlocks / 2) == kThreadsPerBlock);
  CHECK(pushGridBlocks(1024, k1shot, pushBlockLimit(2)) == 8);                    // small: as for any type
  for (long long work : {1LL, 63LL, 128LL, 129LL, 1000LL, 16384LL, 16385LL, 100000LL, 1LL << 20}) {
    for (bool twoShot : {false, true}) {
      for (int cap : {1, 3, 8, 128, kMaxPushBlocks}) {
        const int blocks = pushGridBlocks(work, twoShot, cap);
        const int threads = pushBlockThreads(work, twoShot, blocks);
        CAPTURE(work, twoShot, cap);
        CHECK(blocks >= 1);
        CHECK(blocks <= cap);
        CHECK(threads % 32 == 0);
        CHECK(threads <= kThreadsPerBlock);
        // One pack per thread wherever the width allows it.
        if (threads < pushThreadsPerBlock(work, twoShot) || (threads < kThreadsPerBlock && blocks < kMaxPushBlocks)) {
          CHECK(static_cast<long long>(blocks) * threads >= work);
        }
        // The grid's own count (no cap) never widens a block past pushThreadsPerBlock.
        if (blocks < cap) CHECK(threads <= pushThreadsPerBlock(work, twoShot));
      }
    }
  }
}

TEST_CASE("push rotation: every copy of the area index is advanced by exactly one block of any grid",
          "[geometry]") {
  for (int blocks = 1; blocks <= kMaxPushBlocks; ++blocks) {
    std::vector<int> writers(kMaxPushBlocks, 0);
    // The loop of beginPushRound (kernels/push_rotation.cuh).
    for (int block = 0; block < blocks; ++block) {
      for (int v = block; v < kMaxPushBlocks; v += blocks) writers[v]++;
    }
    CAPTURE(blocks);
    for (int v = 0; v < kMaxPushBlocks; ++v) REQUIRE(writers[v] == 1);
  }
}

namespace {

// Replays where 2shot's pushes land: for every rank, offset o of every shard j. Counts
// writes per (target rank, area pack) and checks that they stay inside the area's use.
struct TwoShotTrace {
  bool inside = true;
  bool eachSlotPackOnce = true;
  std::vector<int> reducedBy;   // per message pack: how many owners reduce it
  std::vector<int> outputWrites;  // per (rank, pack): flattened
};

TwoShotTrace traceTwoShot(long long packs, int ranks) {
  TwoShotTrace t;
  const long long shard = twoShotShardPacks(packs, ranks);
  const std::size_t usePacks = twoShotAreaUse(packs, ranks) / kPackBytes;
  std::vector<std::vector<int>> writes(ranks, std::vector<int>(usePacks, 0));
  t.reducedBy.assign(packs, 0);
  t.outputWrites.assign(static_cast<std::size_t>(ranks) * packs, 0);
  for (int rank = 0; rank < ranks; ++rank) {
    for (long long o = 0; o < shard; ++o) {
      for (int j = 0; j < ranks; ++j) {  // scatter: shard j to its owner, slot `rank`
        const long long g = j * shard + o;
        if (j == rank || g >= packs) continue;
        const long long at = rank * shard + o;
        if (at >= static_cast<long long>(usePacks)) t.inside = false; else writes[j][at]++;
      }
      const long long mine = rank * shard + o;  // reduce + broadcast our shard
      if (mine < packs) {
        t.reducedBy[mine]++;
        t.outputWrites[rank * packs + mine]++;
        for (int q = 0; q < ranks; ++q) {
          if (q == rank) continue;
          const long long at = (ranks + rank) * shard + o;
          if (at >= static_cast<long long>(usePacks)) t.inside = false; else writes[q][at]++;
        }
      }
      for (int j = 0; j < ranks; ++j) {  // gather the others' shards
        const long long g = j * shard + o;
        if (j != rank && g < packs) t.outputWrites[rank * packs + g]++;
      }
    }
  }
  for (const auto& perRank : writes) {
    for (int n : perRank) t.eachSlotPackOnce = t.eachSlotPackOnce && n <= 1;
  }
  return t;
}

}  // namespace

TEST_CASE("2shot: every pack reduced by one owner, written once into every output, all inside the area",
          "[geometry]") {
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    for (long long packs : {1LL, 2LL, 7LL, 8LL, 9LL, 15LL, 513LL, 1023LL, 4097LL}) {
      CAPTURE(ranks, packs);
      const TwoShotTrace t = traceTwoShot(packs, ranks);
      CHECK(t.inside);
      CHECK(t.eachSlotPackOnce);
      for (long long p = 0; p < packs; ++p) REQUIRE(t.reducedBy[p] == 1);
      for (int n : t.outputWrites) REQUIRE(n == 1);
    }
  }
}

TEST_CASE("push areas hold the largest push call of any world size", "[geometry]") {
  for (std::size_t pushMax : {std::size_t{16}, std::size_t{4096}, std::size_t{1} << 20, std::size_t{8} << 20}) {
    for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
      for (std::size_t bytes : {std::size_t{1}, pushMax - 1, pushMax}) {
        CAPTURE(pushMax, ranks, bytes);
        CHECK(twoShotAreaUse(packsOf(static_cast<long long>(bytes)), ranks) <= pushAreaBytesFor(pushMax));
      }
    }
  }
  CHECK(oneShotAreaUse(packsOf(1 << 20), 2) == (2u << 20));
  CHECK(packsOf(1) == 1);
  CHECK(packsOf(16) == 1);
  CHECK(packsOf(17) == 2);
}
