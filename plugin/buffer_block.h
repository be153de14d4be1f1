// The rank's buffer block [Signal | tmp | staging]: one cudaMalloc (not VMM memory, which
// cudaIpcGetMemHandle rejects), zeroed so every barrier count starts at 0.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "../kernels/all_reduce.h"
#include "../kernels/rank_signal.h"

namespace car {

class BufferBlock {
 public:
  // Allocates on `device` (the current device is restored). On failure returns the CUDA
  // error and leaves *out empty.
  static cudaError_t allocate(int device, std::size_t maxBytes, std::unique_ptr<BufferBlock>* out);
  ~BufferBlock();
  BufferBlock(const BufferBlock&) = delete;
  BufferBlock& operator=(const BufferBlock&) = delete;

  void* base() const { return base_; }
  const BlockLayout& layout() const { return layout_; }
  cudaError_t exportHandle(cudaIpcMemHandle_t* handle) const;

 private:
  BufferBlock(int device, void* base, BlockLayout layout) : device_(device), base_(base), layout_(layout) {}
  int device_;
  void* base_;
  BlockLayout layout_;
};

// The kernel's view of every rank's block, given each block's base address as mapped in
// this process (index = rank). Pure arithmetic on the layout.
PeerTable peerTableFromBases(void* const* bases, int ranks, const BlockLayout& layout);

}  // namespace car
