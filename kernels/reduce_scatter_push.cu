// Reduce-scatter (push): rank p writes part j of its input into slot p of rank j's receive
// area; rank j reduces its part as the copies arrive and writes it to its output. 2shot's first
// half, a message being one rank's result: the same wire format per type, rotation, clearing
// and arrival test, and the same sum in rank order 0..n-1, so each element gets the bits an
// all-reduce of ours gives it.
//
// Thread t handles the same part offsets o = t, t + stride, ... in both steps: in place (NCCL's
// form: the output is our own part of the input) the thread that reads our part's pack o is
// the one that writes output pack o, after that read. The other parts are never written.
#include "all_reduce.h"
#include "dispatch.cuh"
#include "geometry.h"
#include "lamport.cuh"
#include "pdl.cuh"
#include "push_rotation.cuh"

namespace car {

template <typename T, int kRanks, typename Op>
__device__ __forceinline__ void reduceScatterPush(const LaunchArgs& args, Op op) {
  constexpr int kWire = kWirePacksOf<T>;
  waitForPreviousGrid();
  allowNextGrid();
  const long long packs = args.packs;  // of one rank's result
  const long long partBytes = args.bytes;
  const long long slotWirePacks = packs * kWire;
  const int rank = args.rank;
  const char* const input = static_cast<const char*>(args.input);
  const PushRound round =
      beginPushRound(args.pushState, DirtySlots{static_cast<std::uint64_t>(slotWirePacks), kRanks, 0});
  const bool outputAligned = aligned16(args.output);
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  auto partPack = [&](int part, long long o) {
    const char* from = input + part * partBytes;
    return wireSafe<kWire>(loadMessagePack(from, o, partBytes, aligned16(from)));
  };

  // 1. Part j of our input into slot `rank` of rank j's area.
  Pack* ourSlotAt[kRanks];
#pragma unroll
  for (int j = 0; j < kRanks; ++j) ourSlotAt[j] = areaAt(args.peers.areas[j], args.areaBytes, round.area) + rank * slotWirePacks;
#pragma unroll 1
  for (long long o = first; o < packs; o += stride) {
#pragma unroll
    for (int j = 0; j < kRanks; ++j) {
      if (j != rank) pushWire(ourSlotAt[j], o, encodeWire<kWire>(partPack(j, o)));
    }
  }

  // 2. While the pushes travel: the previous call's area back to the sentinel.
  clearStaleSlots(areaAt(args.peers.areas[rank], args.areaBytes, round.stale), round.staleSlots, rank, kRanks);

  // 3. Our part, reduced in rank order as every peer's copy arrives.
  const Pack* slots = areaAt(args.peers.areas[rank], args.areaBytes, round.area);
  for (long long o = first; o < packs; o += stride) {
    // Our own pack is loaded before the wait, so that its latency hides behind it.
    const Pack own = partPack(rank, o);
    Pack got[kRanks];
    if (!awaitPacks<kRanks, kWire>(slots, slotWirePacks, o, peersOf<kRanks>(rank), got, args.abortFlag)) return;
    storeMessagePack(args.output, o, partBytes, outputAligned, reduceInRankOrder<T, kRanks>(got, own, rank, op));
  }
}

template <typename T, int kRanks>
__global__ void __launch_bounds__(kThreadsPerBlock, 1) reduceScatterPushKernel(LaunchArgs args) {
  if constexpr (kBuiltForThisArch<T>) {
    withSumSpecialized(args.op, [&](auto op) { reduceScatterPush<T, kRanks>(args, op); });
  }
}

template <typename T, int kRanks>
CollectiveKernel reduceScatterPushKernelOf() {
  return &reduceScatterPushKernel<T, kRanks>;
}

CAR_INSTANTIATE_FOR_TYPES_AND_RANKS(reduceScatterPushKernelOf)

}  // namespace car
