#include "exports/pointer_check.h"

#include <cuda_runtime_api.h>
#include <strings.h>

#include <cstdlib>

namespace car {

bool ncclChecksPointers() {
  static const bool checks = [] {
    // NCCL 2.29 and newer: NCCL_CHECK_MODE=DEBUG_LOCAL or DEBUG_GLOBAL, with
    // NCCL_CHECK_POINTERS=1 kept as its deprecated form; older ones: NCCL_CHECK_POINTERS=1.
    const char* mode = std::getenv("NCCL_CHECK_MODE");
    if (mode != nullptr && (strcasecmp(mode, "DEBUG_LOCAL") == 0 || strcasecmp(mode, "DEBUG_GLOBAL") == 0)) {
      return true;
    }
    const char* value = std::getenv("NCCL_CHECK_POINTERS");
    return value != nullptr && std::atoi(value) == 1;
  }();
  return checks;
}

bool passesNcclPointerCheck(const void* pointer, int device) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError();  // ours must not leave an error for the caller's next CUDA call
    return false;
  }
  if (attributes.devicePointer == nullptr) return false;
  return attributes.type != cudaMemoryTypeDevice || attributes.device == device;
}

}  // namespace car
