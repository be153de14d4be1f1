// NCCL_CAR_GPU_MEMORY_BYTES: how much GPU memory this process's buffer blocks hold on each
// GPU, and whether one more fits. A communicator reserves its block's bytes before its first
// exchange (its record then says whether it has room, so every rank learns it), and the
// reservation lives until the block's memory is freed: through the handshake, in the block,
// and in its retirement (shim/ipc/buffer_block.h).
#pragma once

#include <cstddef>
#include <memory>

namespace car {

class BlockReservation {
 public:
  BlockReservation(int device, std::size_t bytes) : device_(device), bytes_(bytes) {}
  ~BlockReservation();  // gives the bytes back
  BlockReservation(const BlockReservation&) = delete;
  BlockReservation& operator=(const BlockReservation&) = delete;

 private:
  int device_;
  std::size_t bytes_;
};

// `bytes` more on `device`, unless the blocks already held there and these would exceed
// `limit` (0: no limit); null then.
std::unique_ptr<BlockReservation> reserveBlock(int device, std::size_t bytes, std::size_t limit);

// What the blocks of this process hold on `device` now (reserved included).
std::size_t blockBytesHeld(int device);

}  // namespace car
