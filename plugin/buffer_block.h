// The rank's buffer block [Signal | PushState | tmp | staging | push areas]: one cudaMalloc
// (not VMM memory, which cudaIpcGetMemHandle rejects), with the Signal and PushState zeroed
// and the push areas filled with the sentinel, so every count starts at 0 and no pack has
// arrived yet.
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
  static cudaError_t allocate(int device, const BlockLayout& layout, std::unique_ptr<BufferBlock>* out);
  ~BufferBlock();
  BufferBlock(const BufferBlock&) = delete;
  BufferBlock& operator=(const BufferBlock&) = delete;

  void* base() const { return base_; }
  const BlockLayout& layout() const { return layout_; }
  PushState* pushState() const { return reinterpret_cast<PushState*>(static_cast<char*>(base_) + layout_.pushStateOffset); }
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
