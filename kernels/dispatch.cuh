// Declarations of the per-(type, world size) launchers and the one macro that instantiates
// them for every supported combination. dispatch.cu is the only place that picks one.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "all_reduce.h"
#include "packs.cuh"

namespace car {

using KernelLauncher = cudaError_t (*)(const LaunchArgs&, cudaStream_t);

// Every kernel takes the LaunchArgs by value; this is the one place that launches them.
// cudaLaunchKernelEx returns this launch's own error, whatever an earlier call left behind.
using AllReduceKernel = void (*)(LaunchArgs);

inline cudaError_t launchGrid(AllReduceKernel kernel, const LaunchArgs& args, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(args.blocks));
  config.blockDim = dim3(static_cast<unsigned>(args.threads));
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  if (args.pdl) {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&config, kernel, args);
}

template <typename T, int kRanks>
cudaError_t launchOneStage(const LaunchArgs& args, cudaStream_t stream);
template <typename T, int kRanks>
cudaError_t launchTwoStage(const LaunchArgs& args, cudaStream_t stream);
template <typename T, int kRanks>
cudaError_t launchOneShotPush(const LaunchArgs& args, cudaStream_t stream);
template <typename T, int kRanks>
cudaError_t launchTwoShotPush(const LaunchArgs& args, cudaStream_t stream);

// The world sizes 2..8; dispatch.cu checks that this list matches kMaxRanks.
#define CAR_INSTANTIATE_FOR_RANKS(launcher, T)                                   \
  template cudaError_t launcher<T, 2>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 3>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 4>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 5>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 6>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 7>(const LaunchArgs&, cudaStream_t);          \
  template cudaError_t launcher<T, 8>(const LaunchArgs&, cudaStream_t);
constexpr int kInstantiatedMaxRanks = 8;

#define CAR_INSTANTIATE_FOR_TYPES_AND_RANKS(launcher) \
  CAR_INSTANTIATE_FOR_RANKS(launcher, __half)         \
  CAR_INSTANTIATE_FOR_RANKS(launcher, __nv_bfloat16)  \
  CAR_INSTANTIATE_FOR_RANKS(launcher, float)

}  // namespace car
