// The CUDA calls on the eager path of a call of ours, made straight to the driver: the
// kernel launch with functions resolved once (the runtime resolves the function on every
// launch), and the stream queries and the event record. On the 2-H200 host these took 0.3
// to 0.5 us less per call than the runtime's (docs/benchmarks.md, "Host cost of each
// call"). The driver's entry points are asked of the runtime
// (cudaGetDriverEntryPointByVersion, CUDA 12.5 and newer), so nothing links libcuda.
// Where the driver has no entry point or refuses, each falls back to the runtime, whose
// error is then the one returned: errors keep the runtime's codes and texts.
#pragma once

#include <cuda_runtime_api.h>

#include "all_reduce.h"

namespace car {

// `kernel` (a __global__ function's address) as a CUfunction of the current context; null
// where this driver or runtime cannot give one.
void* driverFunctionOf(const void* kernel);

// Launches `function` (from driverFunctionOf) with `args` as its one argument, its grid and
// PDL as LaunchArgs says. False, with nothing launched and CUDA's state untouched, where the
// driver refused; the caller then launches through the runtime, which names the error.
bool launchThroughDriver(void* function, const LaunchArgs& args, cudaStream_t stream);

// cudaStreamIsCapturing: *capturing is true while `stream` is being captured (any mode).
cudaError_t streamIsCapturing(cudaStream_t stream, bool* capturing);
// cudaStreamGetId: CUDA's unique id of `stream` (never reused, unlike handles).
cudaError_t streamIdOf(cudaStream_t stream, unsigned long long* id);
// cudaEventRecord.
cudaError_t recordEvent(cudaEvent_t event, cudaStream_t stream);

}  // namespace car
