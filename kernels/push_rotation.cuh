// What both push kernels do around their data: pick this call's receive area, put the
// previous call's area back to the sentinel, and wait for packs to arrive in our own area.
//
// Why three areas, and why call k may clear area (k - 1) % 3 (docs/design.md): a peer
// writes into our area (k - 1) % 3 next in call k + 2. It starts call k + 2 only after it
// has finished call k + 1, which needs our push of call k + 1, which we make only after our
// call k, clearing included, has ended. And every peer write of call k - 1 into that area
// has landed before we finished call k - 1: we waited for each of those packs.
#pragma once

#include <cstdint>

#include "all_reduce.h"
#include "barrier.cuh"
#include "lamport.cuh"

namespace car {

struct PushRound {
  unsigned area;        // this call's area: pushed into on every rank, polled here
  unsigned stale;       // the previous push call's area, cleared by this call
  DirtySlots staleSlots;
};

// Area `area` of the rank whose area 0 is at `areas`.
__device__ __forceinline__ Pack* areaAt(void* areas, std::size_t areaBytes, unsigned area) {
  return reinterpret_cast<Pack*>(static_cast<char*>(areas) + area * areaBytes);
}

// Called by every thread of the block, first thing after waiting for the previous grid.
// Thread 0 reads the rotation once for the block (all its loads at once: this sits on every
// call's critical path), and the block advances it right away, each thread one copy: the
// next call reads it only after this kernel has ended, and the block uses the shared copy.
// `used` describes the slots this call makes peers write into our area.
__device__ __forceinline__ PushRound beginPushRound(PushState* state, DirtySlots used) {
  __shared__ PushRound shared;
  if (threadIdx.x == 0) {
    const unsigned area = state->areaOf[blockIdx.x];
    DirtySlots dirty[kPushAreas];
#pragma unroll
    for (int a = 0; a < kPushAreas; ++a) dirty[a] = state->dirty[a];
    const unsigned stale = (area + kPushAreas - 1) % kPushAreas;
    shared.area = area;
    shared.stale = stale;
    shared.staleSlots = dirty[0];
#pragma unroll
    for (int a = 1; a < kPushAreas; ++a) {
      if (static_cast<unsigned>(a) == stale) shared.staleSlots = dirty[a];
    }
    if (blockIdx.x == 0) state->dirty[area] = used;
  }
  __syncthreads();
  // Block b owns the copies b, b + G, b + 2G, ...: together the blocks advance them all.
  const unsigned next = (shared.area + 1) % kPushAreas;
  for (unsigned v = blockIdx.x + threadIdx.x * gridDim.x; v < static_cast<unsigned>(kMaxPushBlocks);
       v += gridDim.x * blockDim.x) {
    state->areaOf[v] = next;
  }
  return shared;
}

// Puts the peers' slots of the stale area back to the sentinel, spread over the whole grid.
// Our own slots were never written (a rank keeps its own contribution in registers). The
// loops stay rolled: the stores go out back to back anyway, and code size costs time.
__device__ __forceinline__ void clearStaleSlots(Pack* staleArea, const DirtySlots& dirty, int rank, int ranks) {
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long slotPacks = static_cast<long long>(dirty.slotPacks);
  const Pack sentinel = sentinelPack();
  for (unsigned s = 0; s < dirty.slots; ++s) {
    if (static_cast<int>(s % ranks) == rank) continue;
    Pack* slot = staleArea + s * slotPacks;
#pragma unroll 1
    for (long long i = first; i < slotPacks; i += stride) slot[i] = sentinel;
  }
}

// Waits until data pack `index` of slot r (whose wire packs start at slots + r * slotWirePacks)
// has arrived for every rank r in the mask `expected`, and returns it decoded in got[r]; the
// other entries are left alone. Each look issues all its loads before the first test, so the
// waits overlap. Returns false if the rank was aborted meanwhile.
template <int kRanks, int kWire>
__device__ __forceinline__ bool awaitPacks(const Pack* slots, long long slotWirePacks, long long index,
                                           unsigned expected, Pack (&got)[kRanks],
                                           const volatile std::uint32_t* abortFlag) {
  WirePack<kWire> wire[kRanks];
  unsigned missing = expected;
  // Up to 4 ranks, a first look written out before the loop: straight-line, its loads overlap
  // the work before it, which the large 2shot needs. At more ranks that second copy of the
  // loads costs more than it saves: the kernels are sensitive to their code (docs/design.md,
  // "Kernel code size"). Written out here and in the loop on purpose: one helper for both
  // compiled to different, slower code at 8 ranks.
  if constexpr (kRanks <= 4) {
    missing = 0;
#pragma unroll
    for (int r = 0; r < kRanks; ++r) {
      if ((expected >> r & 1u) != 0) wire[r] = peekWire<kWire>(slots + r * slotWirePacks, index);
    }
#pragma unroll
    for (int r = 0; r < kRanks; ++r) {
      if ((expected >> r & 1u) != 0 && !arrivedWire(wire[r])) missing |= 1u << r;
    }
  }
  unsigned spins = 0;
  while (missing != 0) {
    if (abortFlag != nullptr && ++spins % kSpinsPerAbortCheck == 0 && *abortFlag != 0) return false;
#pragma unroll
    for (int r = 0; r < kRanks; ++r) {
      if ((missing >> r & 1u) != 0) wire[r] = peekWire<kWire>(slots + r * slotWirePacks, index);
    }
#pragma unroll
    for (int r = 0; r < kRanks; ++r) {
      if ((missing >> r & 1u) != 0 && arrivedWire(wire[r])) missing &= ~(1u << r);
    }
  }
#pragma unroll
  for (int r = 0; r < kRanks; ++r) {
    if (expected >> r & 1u) got[r] = decodeWire(wire[r]);
  }
  return true;
}

// Every rank but `rank`.
template <int kRanks>
__device__ __forceinline__ unsigned peersOf(int rank) {
  return ((1u << kRanks) - 1u) & ~(1u << rank);
}

// Reduction of got[0..kRanks) in rank order, with got[rank] taken from `own`: the same
// operations in the same order on every rank, hence the same bits everywhere.
template <typename T, int kRanks>
__device__ __forceinline__ Pack reduceInRankOrder(const Pack (&got)[kRanks], const Pack& own, int rank,
                                                  ReduceOp op) {
  typename PackOf<T>::Accum sum;
#pragma unroll
  for (int r = 0; r < kRanks; ++r) {
    // A select of the bits, not of a reference: keeps got[] in registers.
    Pack source;
    source.bits.x = r == rank ? own.bits.x : got[r].bits.x;
    source.bits.y = r == rank ? own.bits.y : got[r].bits.y;
    source.bits.z = r == rank ? own.bits.z : got[r].bits.z;
    source.bits.w = r == rank ? own.bits.w : got[r].bits.w;
    accumulate<T>(sum, source, r == 0, op);
  }
  return roundToPack<T>(sum, op, kRanks);
}

}  // namespace car
