// 2shot (push): reduce-scatter then all-gather, both by pushing. Rank p writes shard j of its
// input into slot p of rank j's scatter region; rank j reduces its shard as the copies arrive
// and writes the result into slot j of every rank's gather region (and its own output); every
// rank copies the gathered shards into its output. Each rank sends about 2 (n-1)/n x the
// message instead of 1shot's (n-1) x: the choice for large messages and many ranks.
//
// Thread t of a rank handles the same shard offsets o = t, t + stride, ... in all three steps,
// in every shard: so the thread that reads input pack g is the one that writes output pack g,
// after that read, and in-place calls are safe.
#include "all_reduce.h"
#include "dispatch.cuh"
#include "geometry.h"
#include "lamport.cuh"
#include "pdl.cuh"
#include "push_rotation.cuh"

namespace car {

template <typename T, int kRanks, typename Op>
__device__ __forceinline__ void twoShotPush(const LaunchArgs& args, Op op) {
  constexpr int kWire = kWirePacksOf<T>;
  waitForPreviousGrid();
  allowNextGrid();
  const long long packs = args.packs;
  const long long shard = twoShotShardPacks(packs, kRanks);
  const long long slotWirePacks = shard * kWire;
  const int rank = args.rank;
  // Slots 0..n-1 of an area: scatter (slot p from rank p); n..2n-1: gather (n + j from rank j).
  const PushRound round =
      beginPushRound(args.pushState, DirtySlots{static_cast<std::uint64_t>(slotWirePacks), 2 * kRanks, 0});

  const bool inputAligned = aligned16(args.input);
  const bool outputAligned = aligned16(args.output);
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  auto ownPack = [&](long long g) { return wireSafe<kWire>(loadMessagePack(args.input, g, args.bytes, inputAligned)); };

  Pack* areaOf[kRanks];
#pragma unroll
  for (int r = 0; r < kRanks; ++r) areaOf[r] = areaAt(args.peers.areas[r], args.areaBytes, round.area);

  // 1. Scatter: shard j of our input into slot `rank` of rank j's scatter region.
  // Rolled: unrolled copies of this loop, kRanks - 1 stores each, cost more in code size than
  // they gain (docs/design.md, "Kernel code size").
#pragma unroll 1
  for (long long o = first; o < shard; o += stride) {
#pragma unroll
    for (int j = 0; j < kRanks; ++j) {
      const long long g = j * shard + o;
      if (j == rank || g >= packs) continue;
      pushWire(areaOf[j] + rank * slotWirePacks, o, encodeWire<kWire>(ownPack(g)));
    }
  }

  // 2. While the pushes travel: the previous call's area back to the sentinel.
  clearStaleSlots(areaAt(args.peers.areas[rank], args.areaBytes, round.stale), round.staleSlots, rank, kRanks);

  // 3. Reduce our shard as the copies arrive; the result, made safe to push, goes to every
  //    peer's gather slot `rank` and to our own output (the same bits everywhere).
  const Pack* scatter = areaAt(args.peers.areas[rank], args.areaBytes, round.area);
  for (long long o = first; o < shard; o += stride) {
    const long long g = rank * shard + o;
    if (g >= packs) break;
    // Our own pack is loaded before the wait, so that its latency hides behind it.
    const Pack own = ownPack(g);
    Pack got[kRanks];
    if (!awaitPacks<kRanks, kWire>(scatter, slotWirePacks, o, peersOf<kRanks>(rank), got, args.abortFlag)) return;
    const Pack reduced = wireSafe<kWire>(reduceInRankOrder<T, kRanks>(got, own, rank, op));
    const WirePack<kWire> wire = encodeWire<kWire>(reduced);
#pragma unroll
    for (int q = 0; q < kRanks; ++q) {
      if (q != rank) pushWire(areaOf[q] + (kRanks + rank) * slotWirePacks, o, wire);
    }
    storeMessagePack(args.output, g, args.bytes, outputAligned, reduced);
  }

  // 4. Gather: the other shards, reduced by their owners, into our output.
  const Pack* gather = scatter + kRanks * slotWirePacks;
  for (long long o = first; o < shard; o += stride) {
    // Shards that end before offset o (the short last ones) send nothing for it.
    unsigned expected = 0;
#pragma unroll
    for (int j = 0; j < kRanks; ++j) {
      if (j != rank && j * shard + o < packs) expected |= 1u << j;
    }
    Pack got[kRanks];
    if (!awaitPacks<kRanks, kWire>(gather, slotWirePacks, o, expected, got, args.abortFlag)) return;
#pragma unroll
    for (int j = 0; j < kRanks; ++j) {
      if (expected >> j & 1u) storeMessagePack(args.output, j * shard + o, args.bytes, outputAligned, got[j]);
    }
  }
}

template <typename T, int kRanks>
__global__ void __launch_bounds__(kThreadsPerBlock, 1) twoShotPushKernel(LaunchArgs args) {
  if constexpr (kBuiltForThisArch<T>) withSumSpecialized(args.op, [&](auto op) { twoShotPush<T, kRanks>(args, op); });
}

template <typename T, int kRanks>
CollectiveKernel twoShotPushKernelOf() {
  return &twoShotPushKernel<T, kRanks>;
}

CAR_INSTANTIATE_FOR_TYPES_AND_RANKS(twoShotPushKernelOf)

}  // namespace car
