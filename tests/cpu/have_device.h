// Whether this machine has a CUDA device: the CPU tests that touch CUDA check the runtime's
// failures without one, and its answers with one.
#pragma once

#include <cuda_runtime_api.h>

namespace car::testing {

inline bool haveDevice() {
  int devices = 0;
  const bool have = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  cudaGetLastError();
  return have;
}

}  // namespace car::testing
