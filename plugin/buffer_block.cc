#include "buffer_block.h"

#include "cuda_check.h"
#include "device_guard.h"

namespace car {

cudaError_t BufferBlock::allocate(int device, const BlockLayout& layout, std::unique_ptr<BufferBlock>* out) {
  DeviceGuard guard(device);
  if (guard.error() != cudaSuccess) return guard.error();
  void* base = nullptr;
  CAR_CUDA_RETURN_IF_FAILED(device, cudaMalloc(&base, layout.totalBytes));
  // tmp and staging are always written before they are read; the rest must start known.
  // On this thread's own stream, waiting for that alone: a device-wide sync here would wait
  // for every kernel on the GPU, including one of ours that waits for a peer which is itself
  // waiting in this communicator's set-up.
  cudaError_t err = cudaMemsetAsync(base, 0, layout.tmpOffset, cudaStreamPerThread);
  if (err == cudaSuccess) {
    err = fillWithSentinel(static_cast<char*>(base) + layout.areasOffset, kPushAreas * layout.areaBytes,
                           cudaStreamPerThread);
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(cudaStreamPerThread);
  if (err != cudaSuccess) {
    noteCudaFailure(err, LogLevel::Info, "preparing the buffer block", __FILE__, __LINE__, device);
    CAR_CUDA_RELEASE(device, cudaFree(base));
    return err;
  }
  out->reset(new BufferBlock(device, base, layout));
  return cudaSuccess;
}

BufferBlock::~BufferBlock() {
  DeviceGuard guard(device_);
  CAR_CUDA_RELEASE(device_, cudaFree(base_));
}

cudaError_t BufferBlock::exportHandle(cudaIpcMemHandle_t* handle) const {
  DeviceGuard guard(device_);
  CAR_CUDA_RETURN_IF_FAILED(device_, cudaIpcGetMemHandle(handle, base_));
  return cudaSuccess;
}

PeerTable peerTableFromBases(void* const* bases, int ranks, const BlockLayout& layout) {
  PeerTable table{};
  for (int r = 0; r < ranks; ++r) {
    char* base = static_cast<char*>(bases[r]);
    table.signals[r] = reinterpret_cast<Signal*>(base);
    table.tmp[r] = base + layout.tmpOffset;
    table.staging[r] = base + layout.stagingOffset;
    table.areas[r] = base + layout.areasOffset;
  }
  return table;
}

}  // namespace car
