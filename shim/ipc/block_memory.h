// The device memory of one buffer block, and where it goes when its block goes: kept for the
// next block of the same size on the same GPU. cudaFree waits for the whole device: for the
// program's own kernels, and for ours on another communicator, which may be waiting for a
// peer that is itself releasing. Kept memory holds its room under NCCL_CAR_GPU_MEMORY_BYTES
// (shim/ipc/block_budget.h) and is given back to the driver when the process ends. Freed are
// only memory a CUDA graph may still use (forgoReuse) and, at a claim, what is kept on that
// GPU in another size (settings that changed, as in the tests; the library's blocks on a GPU
// all have one size); the process-wide pool hands those frees to the set-up worker
// (shim/ipc/background.h), so no thread of the program waits for the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ipc/block_budget.h"

namespace car {

class BlockMemoryPool;

class BlockMemory {
 public:
  // Room for `bytes` on `device`: kept memory of exactly that size if there is some, else a
  // new reservation within `limit` (0: no limit). Null when neither.
  static std::unique_ptr<BlockMemory> claim(BlockMemoryPool& pool, int device, std::size_t bytes,
                                            std::size_t limit);
  // Allocates the memory, unless it is kept memory (then nothing to do).
  cudaError_t allocate();
  // From now on it is freed (cudaFree, which waits for the device) when it goes, not kept:
  // for memory a CUDA graph's replay may still use after its block went.
  void forgoReuse() { reusable_ = false; }
  // Back to its pool if allocated (with its room), unless forgoReuse(); else the reservation
  // is given back.
  ~BlockMemory();

  void* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  bool reused() const { return reused_; }

  BlockMemory(const BlockMemory&) = delete;
  BlockMemory& operator=(const BlockMemory&) = delete;

 private:
  BlockMemory(BlockMemoryPool& pool, int device, std::size_t bytes) : pool_(pool), device_(device), bytes_(bytes) {}

  BlockMemoryPool& pool_;
  int device_;
  std::size_t bytes_;
  void* base_ = nullptr;
  bool reused_ = false;
  bool reusable_ = true;
  std::unique_ptr<BlockReservation> room_;
};

class BlockMemoryPool {
 public:
  // How the pool gets new memory on a device and gives it back (cudaMalloc and cudaFree for
  // the process-wide one).
  using Allocate = std::function<cudaError_t(int device, std::size_t bytes, void** base)>;
  using Free = std::function<void(int device, void* base)>;
  BlockMemoryPool(Allocate allocate, Free free) : allocate_(std::move(allocate)), free_(std::move(free)) {}

  // Kept allocations on `device`, and their bytes.
  std::size_t keptCount(int device) const;
  std::size_t keptBytes(int device) const;

 private:
  friend class BlockMemory;
  struct Kept {
    int device;
    std::size_t bytes;
    void* base;
    std::unique_ptr<BlockReservation> room;
  };

  Allocate allocate_;
  Free free_;
  mutable std::mutex mutex_;
  std::vector<Kept> kept_;
};

// The process-wide pool, over cudaMalloc. Never destroyed: blocks go at exit too.
BlockMemoryPool& blockMemoryPool();

}  // namespace car
