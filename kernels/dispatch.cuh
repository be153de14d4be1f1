// Declarations of the per-(type, world size) kernel getters and the one macro that
// instantiates them for every supported combination. dispatch.cu is the only place that
// tables them and launches one: through the driver (driver_calls.h), else through launchGrid.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "all_reduce.h"
#include "driver_calls.h"
#include "packs.cuh"

namespace car {

// Every kernel takes the LaunchArgs by value; this is their launch through the runtime.
// cudaLaunchKernelEx returns this launch's own error, whatever an earlier call left behind.
using CollectiveKernel = void (*)(LaunchArgs);

inline cudaError_t launchGrid(CollectiveKernel kernel, const LaunchShape& shape, const LaunchArgs& args,
                              cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(shape.blocks);
  config.blockDim = dim3(shape.threads);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  if (shape.pdl) {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&config, kernel, args);
}

template <typename T, int kRanks>
CollectiveKernel oneStageKernelOf();
template <typename T, int kRanks>
CollectiveKernel twoStageKernelOf();
template <typename T, int kRanks>
CollectiveKernel oneShotPushKernelOf();
template <typename T, int kRanks>
CollectiveKernel twoShotPushKernelOf();
template <typename T, int kRanks>
CollectiveKernel reduceScatterPushKernelOf();
// The all-gather moves bits: one kernel per world size serves every type.
template <int kRanks>
CollectiveKernel allGatherPushKernelOf();

// The world sizes 2..8; dispatch.cu checks that this list matches kMaxRanks.
#define CAR_INSTANTIATE_FOR_RANKS(getter, T) \
  template CollectiveKernel getter<T, 2>();   \
  template CollectiveKernel getter<T, 3>();   \
  template CollectiveKernel getter<T, 4>();   \
  template CollectiveKernel getter<T, 5>();   \
  template CollectiveKernel getter<T, 6>();   \
  template CollectiveKernel getter<T, 7>();   \
  template CollectiveKernel getter<T, 8>();
constexpr int kInstantiatedMaxRanks = 8;

// Every ElementType with the device type of one element: X(enumerator, type, arg), arg
// passed through for the caller.
#define CAR_FOR_EACH_ELEMENT_TYPE(X, arg) \
  X(Int8, std::int8_t, arg)               \
  X(UInt8, std::uint8_t, arg)             \
  X(Int32, std::int32_t, arg)             \
  X(UInt32, std::uint32_t, arg)           \
  X(Int64, std::int64_t, arg)             \
  X(UInt64, std::uint64_t, arg)           \
  X(Float16, __half, arg)                 \
  X(BFloat16, __nv_bfloat16, arg)         \
  X(Float32, float, arg)                  \
  X(Float64, double, arg)                 \
  X(Float8E4M3, __nv_fp8_e4m3, arg)       \
  X(Float8E5M2, __nv_fp8_e5m2, arg)
#define CAR_COUNT_TYPE(enumerator, T, unused) +1
constexpr int kInstantiatedTypes = 0 CAR_FOR_EACH_ELEMENT_TYPE(CAR_COUNT_TYPE, unused);
#undef CAR_COUNT_TYPE

#define CAR_INSTANTIATE_TYPE(enumerator, T, getter) CAR_INSTANTIATE_FOR_RANKS(getter, T)

// Whether this device pass builds the bodies of the kernels for element type T: not fp8
// before sm_90. NCCL reduces fp8 only from sm_90 on, so the policy forwards fp8 calls on
// older GPUs (decideCall, plugin/policy.cc) and the GPU tests skip them; there those kernels
// are empty, where with their conversions done in software they were three times the size
// of the others (docs/benchmarks.md, "Library size").
template <typename T>
constexpr bool kBuiltForThisArch =
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    !kIsFp8<T>;
#else
    true;
#endif
#define CAR_INSTANTIATE_FOR_TYPES_AND_RANKS(getter) CAR_FOR_EACH_ELEMENT_TYPE(CAR_INSTANTIATE_TYPE, getter)

}  // namespace car
