// The library's one way to look at a CUDA result. A failure is logged with the call, file
// and line, and CUDA's last-error slot is cleared, so that the application's next
// cudaGetLastError reports its own work, never ours (the idea of NCCL's checks.h, without
// exceptions or jumps). Nothing here exits or aborts.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "log.h"

namespace car {

// Logs `call` failing with `err` at `level` (file and line included) and clears the last
// error. Returns err.
cudaError_t noteCudaFailure(cudaError_t err, LogLevel level, const char* call, const char* file, int line,
                            int device);

// Why CUDA cannot be used, in the words nccl-car doctor uses for the same machine: "no NVIDIA
// driver on this machine (libcuda.so.1 not found)", "no CUDA device visible", "the NVIDIA
// driver is older than ...", else CUDA's own name of `err`.
std::string cudaUnusableReason(cudaError_t err);

}  // namespace car

// Evaluates a CUDA call; on failure logs it at INFO, clears the error and returns it from the
// enclosing function (which returns cudaError_t). For paths whose caller reports the outcome.
#define CAR_CUDA_RETURN_IF_FAILED(device, call)                                                      \
  do {                                                                                               \
    const cudaError_t carCudaResult = (call);                                                        \
    if (carCudaResult != cudaSuccess)                                                                \
      return ::car::noteCudaFailure(carCudaResult, ::car::LogLevel::Info, #call, __FILE__, __LINE__, \
                                    device);                                                         \
  } while (0)

// Release paths (free, close, destroy): a failure is logged at INFO and cleared, and the
// release goes on with the next step; there is nobody to return it to.
#define CAR_CUDA_RELEASE(device, call)                                                             \
  do {                                                                                             \
    const cudaError_t carCudaResult = (call);                                                      \
    if (carCudaResult != cudaSuccess)                                                              \
      ::car::noteCudaFailure(carCudaResult, ::car::LogLevel::Info, #call, __FILE__, __LINE__, device); \
  } while (0)
