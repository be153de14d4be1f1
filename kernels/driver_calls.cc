#include "driver_calls.h"

#include <cuda.h>
#include <cudaTypedefs.h>

namespace car {
namespace {

// Looked up once; a driver without it keeps the runtime's launch.
PFN_cuLaunchKernelEx_v11060 driverLaunch() {
  static const auto launch = driverEntry<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx", 11060);
  return launch;
}

}  // namespace

void* driverFunctionOf(const void* kernel) {
  if (kernel == nullptr || driverLaunch() == nullptr) return nullptr;
  cudaFunction_t function = nullptr;
  if (cudaGetFuncBySymbol(&function, kernel) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<void*>(function);
}

bool launchThroughDriver(void* function, const LaunchShape& shape, const LaunchArgs& args, cudaStream_t stream) {
  if (function == nullptr || driverLaunch() == nullptr) return false;
  CUlaunchConfig config{};
  config.gridDimX = shape.blocks;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = shape.threads;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = reinterpret_cast<CUstream>(stream);
  CUlaunchAttribute attribute{};
  if (shape.pdl) {
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  void* params[] = {const_cast<LaunchArgs*>(&args)};
  return driverLaunch()(&config, static_cast<CUfunction>(function), params, nullptr) == CUDA_SUCCESS;
}

}  // namespace car
