// 1shot (push): every rank writes its whole input into its own slot of every peer's receive
// area, then reduces all slots of its own area as they arrive. No barrier, no staging copy:
// one pass over NVLink and the spin on local memory are all the latency there is. The
// fastest choice while ranks x message is small.
#include "all_reduce.h"
#include "dispatch.cuh"
#include "geometry.h"
#include "lamport.cuh"
#include "pdl.cuh"
#include "push_rotation.cuh"

namespace car {

template <typename T, int kRanks, typename Op>
__device__ __forceinline__ void oneShotPush(const LaunchArgs& args, Op op) {
  constexpr int kWire = kWirePacksOf<T>;
  waitForPreviousGrid();
  allowNextGrid();
  const long long packs = args.packs;
  const long long slotWirePacks = packs * kWire;
  const int rank = args.rank;
  const bool inputAligned = aligned16(args.input);
  const bool outputAligned = aligned16(args.output);
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  // This thread's first pack is loaded before the rotation is read: the two latencies
  // overlap, and the pack stays in registers as our own contribution. (Usually the only
  // pack: the grid has one thread per pack up to kMaxPushBlocks blocks.)
  auto ownPack = [&](long long i) { return wireSafe<kWire>(loadMessagePack(args.input, i, args.bytes, inputAligned)); };
  const Pack firstPack = first < packs ? ownPack(first) : Pack{};
  const PushRound round =
      beginPushRound(args.pushState, DirtySlots{static_cast<std::uint64_t>(slotWirePacks), kRanks, 0});

  // 1. Our input into slot `rank` of every peer's area.
  Pack* ourSlotAt[kRanks];
#pragma unroll
  for (int r = 0; r < kRanks; ++r) ourSlotAt[r] = areaAt(args.peers.areas[r], args.areaBytes, round.area) + rank * slotWirePacks;
  // Rolled: unrolled copies of this loop, kRanks - 1 stores each, cost more in code size than
  // they gain (docs/design.md, "Kernel code size").
#pragma unroll 1
  for (long long i = first; i < packs; i += stride) {
    const WirePack<kWire> wire = encodeWire<kWire>(i == first ? firstPack : ownPack(i));
#pragma unroll
    for (int r = 0; r < kRanks; ++r) {
      if (r != rank) pushWire(ourSlotAt[r], i, wire);
    }
  }

  // 2. While the pushes travel: the previous call's area back to the sentinel.
  clearStaleSlots(areaAt(args.peers.areas[rank], args.areaBytes, round.stale), round.staleSlots, rank, kRanks);

  // 3. Reduce each pack once every peer's copy is here. The thread that pushed pack i also
  //    writes output pack i, after its last read of input pack i: in-place calls are safe.
  const Pack* slots = areaAt(args.peers.areas[rank], args.areaBytes, round.area);
  for (long long i = first; i < packs; i += stride) {
    // Our own pack is loaded before the wait, so that its latency hides behind it.
    const Pack own = i == first ? firstPack : ownPack(i);
    Pack got[kRanks];
    if (!awaitPacks<kRanks, kWire>(slots, slotWirePacks, i, peersOf<kRanks>(rank), got, args.abortFlag)) return;
    storeMessagePack(args.output, i, args.bytes, outputAligned, reduceInRankOrder<T, kRanks>(got, own, rank, op));
  }
}

template <typename T, int kRanks>
__global__ void __launch_bounds__(kThreadsPerBlock, 1) oneShotPushKernel(LaunchArgs args) {
  if constexpr (kBuiltForThisArch<T>) withSumSpecialized(args.op, [&](auto op) { oneShotPush<T, kRanks>(args, op); });
}

template <typename T, int kRanks>
CollectiveKernel oneShotPushKernelOf() {
  return &oneShotPushKernel<T, kRanks>;
}

CAR_INSTANTIATE_FOR_TYPES_AND_RANKS(oneShotPushKernelOf)

}  // namespace car
