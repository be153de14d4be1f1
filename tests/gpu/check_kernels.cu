#include "check_kernels.h"

#include <cstdint>

namespace car::testing {
namespace {

__global__ void compareAndPoisonKernel(std::uint32_t* output, const std::uint32_t* expected,
                                       std::size_t words, unsigned long long* errors) {
  unsigned long long bad = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < words;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (output[i] != expected[i]) ++bad;
    output[i] = 0xFFFFFFFFu;
  }
  if (bad != 0) atomicAdd(errors, bad);
}

__global__ void countDifferingBytesKernel(const unsigned char* a, const unsigned char* b, std::size_t bytes,
                                          unsigned long long* differing) {
  unsigned long long bad = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < bytes;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    bad += a[i] != b[i];
  }
  if (bad != 0) atomicAdd(differing, bad);
}

__global__ void gateKernel(const volatile int* gate) {
  while (*gate == 0) {
  }
}

}  // namespace

cudaError_t countDifferingBytes(const void* a, const void* b, std::size_t bytes, unsigned long long* differing,
                                cudaStream_t stream) {
  const std::size_t blocks = bytes / 1024 + 1 < 128 ? bytes / 1024 + 1 : 128;
  countDifferingBytesKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      static_cast<const unsigned char*>(a), static_cast<const unsigned char*>(b), bytes, differing);
  return cudaGetLastError();
}

cudaError_t launchGate(const volatile int* gate, cudaStream_t stream) {
  gateKernel<<<1, 1, 0, stream>>>(gate);
  return cudaGetLastError();
}

cudaError_t leaveStaleLaunchError() {
  gateKernel<<<1, 4096>>>(nullptr);  // more threads than a block may have: never runs
  return cudaPeekAtLastError();
}

cudaError_t compareAndPoison(void* output, const void* expected, std::size_t bytes,
                             unsigned long long* errors, cudaStream_t stream) {
  const std::size_t words = bytes / 4;
  const int blocks = static_cast<int>(words / 256 + 1 < 64 ? words / 256 + 1 : 64);
  compareAndPoisonKernel<<<blocks, 256, 0, stream>>>(static_cast<std::uint32_t*>(output),
                                                     static_cast<const std::uint32_t*>(expected),
                                                     words, errors);
  return cudaGetLastError();
}

}  // namespace car::testing
