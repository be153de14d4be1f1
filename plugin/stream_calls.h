// The stream queries and the event record of the eager path, made straight to the driver
// where it has them, as our launch is (kernels/driver_calls.h says why and how), else through
// the runtime, whose error is then the one returned.
#pragma once

#include <cuda_runtime_api.h>

namespace car {

// cudaStreamIsCapturing: *capturing is true while `stream` is being captured (any mode).
cudaError_t streamIsCapturing(cudaStream_t stream, bool* capturing);
// cudaStreamGetId: CUDA's unique id of `stream` (never reused, unlike handles).
cudaError_t streamIdOf(cudaStream_t stream, unsigned long long* id);
// cudaEventRecord.
cudaError_t recordEvent(cudaEvent_t event, cudaStream_t stream);

}  // namespace car
