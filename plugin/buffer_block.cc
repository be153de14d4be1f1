#include "buffer_block.h"

#include "device_guard.h"

namespace car {

cudaError_t BufferBlock::allocate(int device, std::size_t maxBytes, std::unique_ptr<BufferBlock>* out) {
  DeviceGuard guard(device);
  if (guard.error() != cudaSuccess) return guard.error();
  const BlockLayout layout = layoutForMaxBytes(maxBytes);
  void* base = nullptr;
  cudaError_t err = cudaMalloc(&base, layout.totalBytes);
  if (err != cudaSuccess) return err;
  // Only the Signal must start zeroed; tmp and staging are always written before read.
  // Zero it on this thread's own stream and wait for that alone: a device-wide sync here
  // would wait for every kernel on the GPU, including one of ours that waits for a peer
  // which is itself waiting in this communicator's set-up.
  err = cudaMemsetAsync(base, 0, sizeof(Signal), cudaStreamPerThread);
  if (err == cudaSuccess) err = cudaStreamSynchronize(cudaStreamPerThread);
  if (err != cudaSuccess) {
    cudaFree(base);
    return err;
  }
  out->reset(new BufferBlock(device, base, layout));
  return cudaSuccess;
}

BufferBlock::~BufferBlock() {
  DeviceGuard guard(device_);
  cudaFree(base_);
}

cudaError_t BufferBlock::exportHandle(cudaIpcMemHandle_t* handle) const {
  DeviceGuard guard(device_);
  return cudaIpcGetMemHandle(handle, base_);
}

PeerTable peerTableFromBases(void* const* bases, int ranks, const BlockLayout& layout) {
  PeerTable table{};
  for (int r = 0; r < ranks; ++r) {
    char* base = static_cast<char*>(bases[r]);
    table.signals[r] = reinterpret_cast<Signal*>(base);
    table.tmp[r] = base + layout.tmpOffset;
    table.staging[r] = base + layout.stagingOffset;
  }
  return table;
}

}  // namespace car
