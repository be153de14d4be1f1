#include "device_buffers.h"

namespace car::testing {

DeviceBuffers::DeviceBuffers(int ranks, std::size_t bytes) : bytes_(bytes) {
  for (int r = 0; r < ranks; ++r) {
    void* pointer = nullptr;
    CHECK_CUDA(cudaMalloc(&pointer, bytes));
    pointers_.push_back(pointer);
  }
}

DeviceBuffers::~DeviceBuffers() {
  for (void* pointer : pointers_) cudaFree(pointer);
}

void DeviceBuffers::upload(int rank, const HostBuffer& data) {
  CHECK_CUDA(cudaMemcpy(pointers_[rank], data.bytes.data(), data.bytes.size(), cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the DMA lands, and the ranks' streams
  // are non-blocking: wait, or an all-reduce could read the previous contents.
  CHECK_CUDA(cudaDeviceSynchronize());
}

HostBuffer DeviceBuffers::download(int rank, ElementType type, std::size_t count) const {
  HostBuffer data{type, std::vector<std::uint8_t>(count * elementBytes(type))};
  CHECK_CUDA(cudaMemcpy(data.bytes.data(), pointers_[rank], data.bytes.size(), cudaMemcpyDeviceToHost));
  return data;
}

void DeviceBuffers::poison(std::uint8_t byte) {
  for (void* pointer : pointers_) CHECK_CUDA(cudaMemset(pointer, byte, bytes_));
  CHECK_CUDA(cudaDeviceSynchronize());
}

std::vector<std::uint8_t> DeviceBuffers::read(int rank, std::size_t offset, std::size_t bytes) const {
  std::vector<std::uint8_t> data(bytes);
  CHECK_CUDA(cudaMemcpy(data.data(), static_cast<const std::uint8_t*>(pointers_[rank]) + offset, bytes,
                        cudaMemcpyDeviceToHost));
  return data;
}

}  // namespace car::testing
