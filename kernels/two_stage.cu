// 2stage all-reduce: reduce-scatter into each rank's tmp shard, then all-gather the shards.
// Each rank reads about 2x the message instead of ws x: the choice for larger messages.
#include "all_reduce.h"
#include "barrier.cuh"
#include "dispatch.cuh"
#include "entry.cuh"
#include "geometry.h"
#include "message_packs.cuh"
#include "packs.cuh"
#include "pdl.cuh"

namespace car {

template <typename T, int kRanks>
__device__ __forceinline__ void twoStage(const LaunchArgs& args) {
  waitForPreviousGrid();
  allowNextGrid();
  const PeerTable& peers = args.peers;
  Signal* self = args.selfSignal;
  const int rank = args.rank;
  const Pack* input = static_cast<const Pack*>(args.input);
  void* output = args.output;
  const bool outputAligned = aligned16(output);
  const long long packs = args.packs;
  const volatile std::uint32_t* abortFlag = args.abortFlag;
  // Stage 1 sums the ranks in rank order, as every kernel does: had each owner started at
  // its own rank, an element's order would depend on which shard it falls in, that is on the
  // message size (docs/design.md, "One result per element"). Stage 2 only copies, so its
  // reads are rotated: shard i is rank (rank + i) % n's, and the ranks start on different
  // peers instead of all on rank 0.
  const Pack* sources[kRanks];
  const Pack* shards[kRanks];
#pragma unroll
  for (int i = 0; i < kRanks; ++i) {
    sources[i] = static_cast<const Pack*>(peers.staging[i]);
    shards[i] = static_cast<const Pack*>(peers.tmp[(rank + i) % kRanks]);
  }
  Pack* myShard = static_cast<Pack*>(peers.tmp[rank]);
  const long long thread = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;

  // Every step walks the packs as twoStage*Walk (geometry.h) lay out: rank s reads shard s of
  // our staging in stage 1 at this thread's offsets, so the copy takes every shard at those
  // offsets, and in place this thread later writes exactly the output packs it copied.
  auto copyBlockSlice = [&](Pack* staging, const Pack* in) {
    twoStageCopyWalk<kRanks>(packs, thread, stride, [&](long long pack) { staging[pack] = in[pack]; });
  };
  if (enterAllReduce<kRanks>(peers, self, rank, input, abortFlag, copyBlockSlice)) return;

  // Stage 1: reduce my shard.
  const long long myFirst = shardOf(packs, kRanks, rank).begin;
  twoStageReduceWalk<kRanks>(packs, rank, thread, stride, [&](long long offset) {
    myShard[offset] = reducePacks<T, kRanks>(sources, myFirst + offset, args.op);
  });

  // The shards were written by this very kernel: publish them with release/acquire.
  if (crossRankBarrier<kRanks, BarrierKind::Middle>(peers, self, rank, abortFlag)) return;

  // Stage 2: gather. The barrier is per block: it only guarantees that offset j is ready to
  // the block that, on every rank, wrote offset j in stage 1, which the shared walk ensures.
  twoStageGatherWalk<kRanks>(packs, rank, thread, stride, [&](int i, long long offset, long long pack) {
    storeMessagePack(output, pack, args.bytes, outputAligned, shards[i][offset]);
  });
  // Leave only once every peer's block b has gathered from our tmp: then the end of our
  // kernel means that no peer reads our block any more, which is what lets a rank free its
  // block after its last kernel (docs/design.md, "Release"). The next call's own ordering
  // would not need it: tmp is written again only after the next entry barrier.
  crossRankBarrier<kRanks, BarrierKind::Exit>(peers, self, rank, abortFlag);
}

template <typename T, int kRanks>
__global__ void __launch_bounds__(kThreadsPerBlock, 1) twoStageKernel(LaunchArgs args) {
  if constexpr (kBuiltForThisArch<T>) twoStage<T, kRanks>(args);
}

template <typename T, int kRanks>
CollectiveKernel twoStageKernelOf() {
  return &twoStageKernel<T, kRanks>;
}

CAR_INSTANTIATE_FOR_TYPES_AND_RANKS(twoStageKernelOf)

}  // namespace car
