// 1stage all-reduce: every rank reads every rank's staging copy and reduces all of it.
// Two barriers, ws-fold reads: the fastest choice while the message is small.
#include "all_reduce.h"
#include "barrier.cuh"
#include "dispatch.cuh"
#include "entry.cuh"
#include "message_packs.cuh"
#include "packs.cuh"
#include "pdl.cuh"

namespace car {

// Every rank sums the ranks in the order 0..n-1, as every kernel does, so every rank's output
// is bitwise identical and equal to every other kernel's; do not rotate the sources.
template <typename T, int kRanks>
__device__ __forceinline__ void oneStage(const LaunchArgs& args) {
  waitForPreviousGrid();
  allowNextGrid();
  const PeerTable& peers = args.peers;
  const Pack* input = static_cast<const Pack*>(args.input);
  void* output = args.output;
  const long long packs = args.packs;
  const Pack* sources[kRanks];
#pragma unroll
  for (int r = 0; r < kRanks; ++r) sources[r] = static_cast<const Pack*>(peers.staging[r]);

  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  // Thread t copies, and later reduces, packs t, t + stride, ...
  auto copyBlockSlice = [&](Pack* staging, const Pack* in) {
    for (long long i = first; i < packs; i += stride) staging[i] = in[i];
  };
  if (enterAllReduce<kRanks>(peers, args.selfSignal, args.rank, input, args.abortFlag, copyBlockSlice)) return;
  const bool outputAligned = aligned16(output);
  for (long long i = first; i < packs; i += stride) {
    storeMessagePack(output, i, args.bytes, outputAligned, reducePacks<T, kRanks>(sources, i, args.op));
  }
  // The next call's staging copy (by the copy engine, or by the next kernel before its
  // first barrier) runs as soon as this kernel exits, while a slow peer may still be
  // reading our staging: leave only once every peer's block is done with it.
  crossRankBarrier<kRanks, BarrierKind::Exit>(peers, args.selfSignal, args.rank, args.abortFlag);
}

template <typename T, int kRanks>
__global__ void __launch_bounds__(kThreadsPerBlock, 1) oneStageKernel(LaunchArgs args) {
  if constexpr (kBuiltForThisArch<T>) oneStage<T, kRanks>(args);
}

template <typename T, int kRanks>
CollectiveKernel oneStageKernelOf() {
  return &oneStageKernel<T, kRanks>;
}

CAR_INSTANTIATE_FOR_TYPES_AND_RANKS(oneStageKernelOf)

}  // namespace car
