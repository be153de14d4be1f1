// The first step of both kernels: make sure every rank's staging holds its input, then
// wait for block b of every rank. The input is either already in our staging (the host
// copied it before the launch) or copied here by the kernel itself.
#pragma once

#include <cstdint>

#include "all_reduce.h"
#include "barrier.cuh"
#include "packs.cuh"

namespace car {

// This rank's own staging buffer, writable: the peer table keeps every staging const
// because a kernel only ever reads the peers' copies.
__device__ __forceinline__ Pack* ownStaging(const PeerTable& peers, int rank) {
  return const_cast<Pack*>(static_cast<const Pack*>(peers.staging[rank]));
}

// With an input, block b first copies into our staging exactly the packs that block b of
// every rank will read from it (copyBlockSlice(staging, input) knows which), then publishes
// them with the fenced barrier. Returns true when the rank was aborted while waiting.
template <int kRanks, typename CopyBlockSlice>
__device__ __forceinline__ bool enterAllReduce(const PeerTable& peers, Signal* self, int rank,
                                               const Pack* input,
                                               const volatile std::uint32_t* abortFlag,
                                               CopyBlockSlice copyBlockSlice) {
  if (input == nullptr) return crossRankBarrier<kRanks, BarrierKind::Entry>(peers, self, rank, abortFlag);
  copyBlockSlice(ownStaging(peers, rank), input);
  return crossRankBarrier<kRanks, BarrierKind::EntryAfterCopy>(peers, self, rank, abortFlag);
}

}  // namespace car
