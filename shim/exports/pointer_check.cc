#include "exports/pointer_check.h"

#include <cuda_runtime_api.h>

#include <cstdlib>

namespace car {

bool ncclChecksPointers() {
  static const bool checks = [] {
    const char* value = std::getenv("NCCL_CHECK_POINTERS");
    return value != nullptr && std::atoi(value) != 0;
  }();
  return checks;
}

bool passesNcclPointerCheck(const void* pointer, int device) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError();  // NCCL's check leaves no error behind either
    return false;
  }
  if (attributes.devicePointer == nullptr) return false;
  return attributes.type != cudaMemoryTypeDevice || attributes.device == device;
}

}  // namespace car
