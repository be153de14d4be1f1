// Grid size and the 2stage partition, simulated on the host with the same functions and
// the same thread-to-pack mapping the kernels use.
#include <catch2/catch.hpp>

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

// Replays both stages of the 2stage kernel on the host: which rank reduces each pack
// (stage 1) and which packs each rank gathers (stage 2), with the kernel's loops.
struct PartitionTrace {
  std::vector<int> reducedBy;                 // owner count per pack
  std::vector<std::vector<int>> gatheredBy;   // [rank][pack] count
  bool sameThreadBothStages = true;           // thread t gathers from shard offset j iff t wrote j
};

PartitionTrace trace(long long packs, int ranks, int blocks) {
  PartitionTrace t;
  t.reducedBy.assign(packs, 0);
  t.gatheredBy.assign(ranks, std::vector<int>(packs, 0));
  const long long stride = static_cast<long long>(blocks) * kThreadsPerBlock;
  const long long part = shardPart(packs, ranks);
  const long long largest = largestShard(packs, ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    const Shard mine = shardOf(packs, ranks, rank);
    for (long long thread = 0; thread < stride; ++thread) {
      for (long long j = thread; mine.begin + j < mine.end; j += stride) {
        t.reducedBy[mine.begin + j]++;
        if (j % stride != thread) t.sameThreadBothStages = false;
      }
      for (long long j = thread; j < largest; j += stride) {
        for (int i = 0; i < ranks; ++i) {
          const int from = (rank + i) % ranks;
          if (j < part || from == ranks - 1) t.gatheredBy[rank][from * part + j]++;
        }
      }
    }
  }
  return t;
}

}  // namespace

TEST_CASE("2stage: every pack reduced by exactly one owner and gathered once by every rank",
          "[geometry]") {
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    // Counts below the world size, not divisible by it, and spanning several grid strides.
    for (long long packs : {1LL, 2LL, 7LL, 8LL, 9LL, 513LL, 1023LL, 4097LL, 36LL * 512 * 3 + 5}) {
      const int blocks = gridBlocks(packs, kMaxBlocks);
      CAPTURE(ranks, packs, blocks);
      const PartitionTrace t = trace(packs, ranks, blocks);
      CHECK(t.sameThreadBothStages);
      for (long long p = 0; p < packs; ++p) {
        REQUIRE(t.reducedBy[p] == 1);
        for (int rank = 0; rank < ranks; ++rank) REQUIRE(t.gatheredBy[rank][p] == 1);
      }
    }
  }
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

TEST_CASE("buffer block layout: Signal, then tmp and staging of maxBytes each, aligned", "[geometry]") {
  const BlockLayout layout = layoutForMaxBytes(8 << 20);
  CHECK(layout.tmpOffset >= sizeof(Signal));
  CHECK(layout.tmpOffset % 256 == 0);
  CHECK(layout.stagingOffset == layout.tmpOffset + (8 << 20));
  CHECK(layout.totalBytes == layout.stagingOffset + (8 << 20));
  CHECK(sizeof(Signal) == 128 * ((kMaxBlocks * kMaxRanks * 4 + 127) / 128) + 2 * kMaxBlocks * kMaxRanks * 4);
}
