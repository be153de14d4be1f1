#include "ipc/block_memory.h"

#include "cuda_check.h"
#include "device_guard.h"
#include "ipc/background.h"

namespace car {

std::unique_ptr<BlockMemory> BlockMemory::claim(BlockMemoryPool& pool, int device, std::size_t bytes,
                                                std::size_t limit) {
  std::unique_ptr<BlockMemory> memory(new BlockMemory(pool, device, bytes));
  std::vector<BlockMemoryPool::Kept> unusable;  // kept on this GPU in another size
  {
    std::lock_guard<std::mutex> lock(pool.mutex_);
    for (auto it = pool.kept_.begin(); it != pool.kept_.end(); ++it) {
      if (it->device != device || it->bytes != bytes) continue;
      memory->base_ = it->base;
      memory->room_ = std::move(it->room);
      memory->reused_ = true;
      pool.kept_.erase(it);
      return memory;
    }
    for (auto it = pool.kept_.begin(); it != pool.kept_.end();) {
      if (it->device == device) {
        unusable.push_back(std::move(*it));
        it = pool.kept_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (BlockMemoryPool::Kept& kept : unusable) pool.free_(kept.device, kept.base);  // its room goes with it
  unusable.clear();
  memory->room_ = reserveBlock(device, bytes, limit);
  if (!memory->room_) return nullptr;
  return memory;
}

cudaError_t BlockMemory::allocate() {
  if (base_ != nullptr) return cudaSuccess;
  return pool_.allocate_(device_, bytes_, &base_);
}

BlockMemory::~BlockMemory() {
  if (base_ == nullptr) return;  // the reservation alone goes
  if (!reusable_) {
    pool_.free_(device_, base_);  // its room goes with room_
    return;
  }
  std::lock_guard<std::mutex> lock(pool_.mutex_);
  pool_.kept_.push_back(BlockMemoryPool::Kept{device_, bytes_, base_, std::move(room_)});
}

std::size_t BlockMemoryPool::keptCount(int device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t count = 0;
  for (const Kept& kept : kept_) count += kept.device == device ? 1 : 0;
  return count;
}

std::size_t BlockMemoryPool::keptBytes(int device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t bytes = 0;
  for (const Kept& kept : kept_) bytes += kept.device == device ? kept.bytes : 0;
  return bytes;
}

BlockMemoryPool& blockMemoryPool() {
  static auto* pool = new BlockMemoryPool([](int device, std::size_t bytes, void** base) {
    DeviceGuard guard(device);
    if (guard.error() != cudaSuccess) return guard.error();
    CAR_CUDA_RETURN_IF_FAILED(device, cudaMalloc(base, bytes));
    return cudaSuccess;
  }, [](int device, void* base) {
    runInBackground([device, base] {
      DeviceGuard guard(device);
      CAR_CUDA_RELEASE(device, cudaFree(base));
    });
  });
  return *pool;
}

}  // namespace car
