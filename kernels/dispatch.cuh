// Declarations of the per-(type, world size) kernel getters and the one macro that
// instantiates them for every supported combination. dispatch.cu is the only place that
// picks one, and launchGrid the only place that launches one.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "all_reduce.h"
#include "packs.cuh"

namespace car {

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
AllReduceKernel oneStageKernelOf();
template <typename T, int kRanks>
AllReduceKernel twoStageKernelOf();
template <typename T, int kRanks>
AllReduceKernel oneShotPushKernelOf();
template <typename T, int kRanks>
AllReduceKernel twoShotPushKernelOf();

// The world sizes 2..8; dispatch.cu checks that this list matches kMaxRanks.
#define CAR_INSTANTIATE_FOR_RANKS(getter, T) \
  template AllReduceKernel getter<T, 2>();   \
  template AllReduceKernel getter<T, 3>();   \
  template AllReduceKernel getter<T, 4>();   \
  template AllReduceKernel getter<T, 5>();   \
  template AllReduceKernel getter<T, 6>();   \
  template AllReduceKernel getter<T, 7>();   \
  template AllReduceKernel getter<T, 8>();
constexpr int kInstantiatedMaxRanks = 8;

#define CAR_INSTANTIATE_FOR_TYPES_AND_RANKS(getter) \
  CAR_INSTANTIATE_FOR_RANKS(getter, __half)         \
  CAR_INSTANTIATE_FOR_RANKS(getter, __nv_bfloat16)  \
  CAR_INSTANTIATE_FOR_RANKS(getter, float)

}  // namespace car
