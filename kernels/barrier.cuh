// The cross-rank barrier. Per block, not per grid: block b of this rank waits only for
// block b of every rank. That is enough because every rank launches the same grid and maps
// threads to packs the same way, so the ranks' blocks b touch the same packs.
#pragma once

#include <cstdint>

#include "all_reduce.h"
#include "flags.cuh"

namespace car {

enum class BarrierKind {
  Entry,   // first thing in a kernel: nothing to finish before, the whole block waits after
  EntryAfterCopy,  // first barrier of a kernel that just copied its input into its staging:
                   // finish the copy, publish it (release), wait, then read (acquire)
  Middle,  // between 2stage's stages: finish stage 1, publish it (release), wait, then read
  Exit,    // 1stage's last act: finish reading the peers' staging, tell them, leave
};

// How many spins between two looks at the host-mapped abort word: reading host memory
// over PCIe on every spin would slow the common case for a rare one.
constexpr unsigned kSpinsPerAbortCheck = 1024;

// Returns true when the barrier was left because the rank was aborted; the value is the
// same for every thread of the block except after an Exit barrier, where nothing follows.
template <int kRanks, BarrierKind kKind>
__device__ __forceinline__ bool crossRankBarrier(const PeerTable& peers, Signal* self, int rank,
                                                 const volatile std::uint32_t* abortFlag) {
  constexpr bool kFenced = (kKind == BarrierKind::Middle || kKind == BarrierKind::EntryAfterCopy);
  // Before announcing "block b is done", every thread of the block must be done: the
  // syncthreads also orders the block's writes (stage 1, or the copy) before the lane's
  // release store.
  if constexpr (kKind != BarrierKind::Entry) __syncthreads();

  // Lane p handles the edge between this rank and rank p: it tells rank p "my block b
  // reached round r" and waits until rank p told us the same. The round count is private
  // to (block, lane), so a plain increment suffices.
  bool aborted = false;
  if (threadIdx.x < kRanks) {
    const int peer = threadIdx.x;
    const FlagWord round = self->roundOf[blockIdx.x][peer] + 1;
    self->roundOf[blockIdx.x][peer] = round;
    FlagWord* remoteFlag = &peers.signals[peer]->arrived[round % 2][blockIdx.x][rank];
    const FlagWord* localFlag = &self->arrived[round % 2][blockIdx.x][peer];
    if constexpr (kFenced) storeFlagRelease(remoteFlag, round);
    else storeFlagVolatile(remoteFlag, round);
    // Spin with != rather than <: the count wraps at 2^32, and the only stale value a
    // flag can hold is round - 2, never round.
    unsigned spins = 0;
    while ((kFenced ? loadFlagAcquire(localFlag) : loadFlagVolatile(localFlag)) != round) {
      if (abortFlag != nullptr && ++spins % kSpinsPerAbortCheck == 0 && *abortFlag != 0) {
        aborted = true;
        break;
      }
    }
    // A peer may have filled its staging inside its kernel and announced it with a release
    // store (EntryAfterCopy) while this rank waited with volatile loads: one acquire of the
    // flag it already saw pairs with that release, so this block's reads of the peer's
    // staging see the copy. The flag cannot change before our next barrier, so this is one
    // load per lane per call, not an acquire on every spin.
    if constexpr (kKind == BarrierKind::Entry) {
      if (!aborted) loadFlagAcquire(localFlag);
    }
  }
  // Hold the rest of the block until the lanes return; with a fence this also hands the
  // lanes' acquire on to every thread that reads the peers' tmp next.
  // __syncthreads_or also tells every thread whether any lane gave up on an abort.
  if constexpr (kKind != BarrierKind::Exit) return __syncthreads_or(aborted) != 0;
  return aborted;
}

}  // namespace car
