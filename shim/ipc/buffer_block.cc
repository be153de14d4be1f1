#include "ipc/buffer_block.h"

#include "../kernels/all_reduce.h"
#include "cuda_check.h"
#include "device_guard.h"
#include "ipc/block_retirement.h"
#include "policy.h"

namespace car {
namespace {

cudaError_t exportHandle(int device, void* base, cudaIpcMemHandle_t* handle) {
  CAR_CUDA_RETURN_IF_FAILED(device, cudaIpcGetMemHandle(handle, base));
  return cudaSuccess;
}

}  // namespace

BlockLayout blockLayoutFor(const Config& config) {
  return layoutFor(pullBufferBytes(config), config.pushMaxBytes);
}

std::unique_ptr<BufferBlock> BufferBlock::create(std::unique_ptr<SysvReleaseBoard> board) {
  if (!board) return nullptr;
  return std::unique_ptr<BufferBlock>(new BufferBlock(std::move(board)));
}

cudaError_t BufferBlock::allocate(std::unique_ptr<BlockMemory> memory, const BlockLayout& layout,
                                  cudaStream_t stream) {
  if (!memory || memory->bytes() != layout.totalBytes) return cudaErrorInvalidValue;
  const int device = memory->device();
  DeviceGuard guard(device);
  if (guard.error() != cudaSuccess) return guard.error();
  CAR_CUDA_RETURN_IF_FAILED(device, memory->allocate());
  void* base = memory->base();
  // tmp and staging are always written before they are read; the rest must start known
  // (kept memory too: the last block in it left its counts behind).
  // On the caller's non-blocking stream, waiting for that alone: a device-wide sync, or a
  // blocking stream (cudaStreamPerThread waits for the legacy stream), would wait for the
  // program's own kernels, or for one of ours that waits for a peer which is itself waiting
  // in this communicator's set-up.
  cudaError_t err = cudaMemsetAsync(base, 0, layout.tmpOffset, stream);
  if (err == cudaSuccess) {
    err = fillWithSentinel(static_cast<char*>(base) + layout.areasOffset, kPushAreas * layout.areaBytes, stream);
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    noteCudaFailure(err, LogLevel::Info, "preparing the buffer block", __FILE__, __LINE__, device);
    return err;  // the memory goes back with `memory`: never exported, so nobody mapped it
  }
  CAR_CUDA_RETURN_IF_FAILED(device, exportHandle(device, base, &handle_));
  device_ = device;
  base_ = base;
  layout_ = layout;
  memory_ = std::move(memory);
  return cudaSuccess;
}

cudaError_t BufferBlock::allocate(int device, const BlockLayout& layout, cudaStream_t stream) {
  std::unique_ptr<BlockMemory> memory = BlockMemory::claim(blockMemoryPool(), device, layout.totalBytes, 0);
  return allocate(std::move(memory), layout, stream);
}

PublishedBlock BufferBlock::published() const {
  PublishedBlock block;
  block.address = reinterpret_cast<std::uint64_t>(base_);
  block.handle = handle_;
  return block;
}

bool BufferBlock::mapPeers(const std::vector<PeerLocation>& peers, const std::vector<PublishedBlock>& blocks,
                           std::vector<std::unique_ptr<SysvReleaseBoard>> peerBoards, int myRank,
                           std::vector<void*>* bases, std::string* problem) {
  return peers_.mapAll(peers, blocks, std::move(peerBoards), myRank, device_, base_, bases, problem);
}

std::vector<BoardPage*> BufferBlock::boardPages(int myRank) const {
  std::vector<BoardPage*> pages = peers_.boardPages();
  if (myRank >= 0 && static_cast<std::size_t>(myRank) < pages.size()) pages[static_cast<std::size_t>(myRank)] = &board_->page();
  return pages;
}

void BufferBlock::retire(std::unique_ptr<BufferBlock> block, const std::string& who, bool waitForImporters) {
  if (!block) return;
  block->peers_.unmapAll();
  if (block->base_ == nullptr) return;  // never allocated: the board alone goes with the object
  RetiringBlock retiring;
  retiring.board = std::move(block->board_);
  block->base_ = nullptr;  // from here on retirement owns the memory
  // The memory, with its room, goes back to the pool once retirement lets go of it.
  retiring.free = [memory = std::shared_ptr<BlockMemory>(std::move(block->memory_))]() mutable { memory.reset(); };
  retiring.who = who;
  retiring.device = block->device_;
  blockRetirement().retire(std::move(retiring), waitForImporters);
}

void BufferBlock::abandon(std::unique_ptr<BufferBlock> block) {
  static_cast<void>(block.release());  // nothing of it is freed, unmapped or detached, ever
}

BufferBlock::~BufferBlock() {
  peers_.unmapAll();
  // memory_ goes with it, back to the pool
}

}  // namespace car
