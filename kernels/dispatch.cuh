// Declarations of the per-(type, world size) launchers and the one macro that instantiates
// them for every supported combination. dispatch.cu is the only place that picks one.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "all_reduce.h"
#include "packs.cuh"

namespace car {

using KernelLauncher = cudaError_t (*)(const LaunchArgs&, cudaStream_t);

// Both kernels take the same arguments; this is the one place that launches them.
using AllReduceKernel = void (*)(PeerTable, Signal*, int, const Pack*, Pack*, long long,
                                 const volatile std::uint32_t*);

inline cudaError_t launchGrid(AllReduceKernel kernel, const LaunchArgs& args, cudaStream_t stream) {
  kernel<<<args.blocks, kThreadsPerBlock, 0, stream>>>(
      args.peers, args.selfSignal, args.rank, static_cast<const Pack*>(args.input),
      static_cast<Pack*>(args.output), args.packs, args.abortFlag);
  return cudaGetLastError();
}

template <typename T, int kRanks>
cudaError_t launchOneStage(const LaunchArgs& args, cudaStream_t stream);
template <typename T, int kRanks>
cudaError_t launchTwoStage(const LaunchArgs& args, cudaStream_t stream);

#define CAR_INSTANTIATE_FOR_RANKS(launcher, T)                                   \
  template cudaError_t launcher<T, 2>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 3>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 4>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 5>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 6>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 7>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 8>(const LaunchArgs&, cudaStream_t);

#define CAR_INSTANTIATE_FOR_TYPES_AND_RANKS(launcher) \
  CAR_INSTANTIATE_FOR_RANKS(launcher, __half)         \
  CAR_INSTANTIATE_FOR_RANKS(launcher, __nv_bfloat16)  \
  CAR_INSTANTIATE_FOR_RANKS(launcher, float)

}  // namespace car
