// Our kernel launch made straight to the driver, with each function resolved once: the
// runtime resolves the function on every launch, a cost every eager call of ours would pay
// (docs/benchmarks.md has the figures). The driver's entry points are asked of the runtime
// (cudaGetDriverEntryPointByVersion, CUDA 12.5 and newer), so nothing links libcuda. Where
// the driver has no entry point or refuses, the caller falls back to the runtime, whose error
// is then the one returned: errors keep the runtime's codes and texts. The stream and event
// calls of the eager path do the same (plugin/stream_calls.h).
#pragma once

#include <cuda_runtime_api.h>

#include "all_reduce.h"

namespace car {

// The driver's `name` in the form of CUDA `version` (the one its PFN_ type is of), or null.
template <typename Function>
Function driverEntry(const char* name, unsigned version) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &entry, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Function>(entry);
}

// `kernel` (a __global__ function's address) as a CUfunction of the current context; null
// where this driver or runtime cannot give one.
void* driverFunctionOf(const void* kernel);

// How a kernel is launched, built once per launch from its LaunchArgs and read by both
// launch forms: the driver's here and the runtime's (dispatch.cuh).
struct LaunchShape {
  unsigned blocks = 0;
  unsigned threads = 0;
  bool pdl = false;  // programmatic stream serialisation allowed
};

inline LaunchShape launchShapeOf(const LaunchArgs& args) {
  return LaunchShape{static_cast<unsigned>(args.blocks), static_cast<unsigned>(args.threads), args.pdl};
}

// Launches `function` (from driverFunctionOf) in `shape` with `args` as its one argument.
// False, with nothing launched and CUDA's state untouched, where the driver refused; the
// caller then launches through the runtime, which names the error.
bool launchThroughDriver(void* function, const LaunchShape& shape, const LaunchArgs& args, cudaStream_t stream);

}  // namespace car
