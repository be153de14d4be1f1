// The buffer block of one rank of one communicator, from its allocation to its retirement,
// and this rank's view of its peers' blocks: one owner for all of it (docs/design.md, "The
// buffer block" and "Release"). In order:
//   create()    with its release board (shim/ipc/release_board.h), made before the set-up's
//               exchange: peers attach it before they map the block, so the owner can tell
//               when none maps it any more;
//   allocate()  the device memory (kernels/rank_signal.h's layout; shim/ipc/block_memory.h),
//               initialised and exported;
//   published() what a peer needs to map it, for our board;
//   mapPeers()  every peer's block mapped here, each behind the peer's board;
//   retire()    our mappings of the peers closed, then our block's memory let go once no
//               importer is left (kept for the next block, never cudaFree'd); or abandon():
//               everything kept, because a kernel of ours may still run.
// The launcher (plugin/launcher.h) only borrows the addresses, from attachPeers() on.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "../kernels/rank_signal.h"
#include "config.h"
#include "ipc/block_memory.h"
#include "ipc/board_page.h"
#include "ipc/peer_mapping.h"
#include "ipc/release_board.h"

namespace car {

// The layout every rank computes alike from the settings they share: pull buffers only where
// a pull kernel can be chosen, push areas sized by NCCL_CAR_PUSH_MAX_BYTES.
BlockLayout blockLayoutFor(const Config& config);

class BufferBlock {
 public:
  // A block around its release board (made by SysvReleaseBoard::create), nothing allocated yet.
  static std::unique_ptr<BufferBlock> create(std::unique_ptr<SysvReleaseBoard> board);

  // Allocates the block in `memory` (claimed by the caller, with its room; kept memory of an
  // earlier block, or new memory: one cudaMalloc, not VMM memory, which cudaIpcGetMemHandle
  // rejects), Signal and PushState zeroed and the push areas filled with the sentinel, so
  // every count starts at 0 and no pack has arrived yet; then its IPC handle. The filling runs
  // on `stream`, which must be a non-blocking one of the caller's: waiting for it alone waits
  // for nothing else the program runs (not the legacy stream's work). On failure the memory
  // goes with `memory` (into the pool if it was allocated, as nobody mapped it) and the CUDA
  // error is returned.
  cudaError_t allocate(std::unique_ptr<BlockMemory> memory, const BlockLayout& layout, cudaStream_t stream);
  // The same with memory claimed here, from the process-wide pool, without a bound.
  cudaError_t allocate(int device, const BlockLayout& layout, cudaStream_t stream);

  // The block's address and its IPC handle (once allocated), for the peers.
  PublishedBlock published() const;

  // Fills bases[r] with rank r's block as seen here (our own at myRank), from where the peers
  // are and the blocks they published, behind their boards (peerBoards[r], attached by the caller;
  // null at myRank), which it keeps until its mappings are closed. On failure unmaps what it
  // mapped and describes the first problem.
  bool mapPeers(const std::vector<PeerLocation>& peers, const std::vector<PublishedBlock>& blocks,
                std::vector<std::unique_ptr<SysvReleaseBoard>> peerBoards, int myRank, std::vector<void*>* bases,
                std::string* problem);
  // Every rank's board page (ours at myRank), once the peers are mapped: what the agreement on
  // the first call taken reads (shim/handshake/setup_board.h). Valid while the block lives.
  std::vector<BoardPage*> boardPages(int myRank) const;

  void* base() const { return base_; }
  const BlockLayout& layout() const { return layout_; }
  int device() const { return device_; }

  // The block's memory is freed when it goes (cudaFree), not kept for the next block: a CUDA
  // graph that captured a call over it may still be replaying.
  void forgoReuse() {
    if (memory_) memory_->forgoReuse();
  }

  // Closes our mappings of the peers' blocks (and leaves their boards), then lets go of our
  // block's memory as soon as no peer maps it (shim/ipc/block_retirement.h), waiting a little
  // for importers in other processes when `waitForImporters`. No kernel of ours may still use
  // any of it. `who` names the rank in the log. A null block is nothing to do.
  static void retire(std::unique_ptr<BufferBlock> block, const std::string& who, bool waitForImporters = true);
  // Keeps the block, our mappings and every board attached for good: a kernel of ours that
  // never ended may still read and write through them.
  static void abandon(std::unique_ptr<BufferBlock> block);

  // Lets go at once of what retire() lets go once no peer maps it: only for a block no peer
  // can have mapped (never published, or only ranks of this process that are gone).
  ~BufferBlock();
  BufferBlock(const BufferBlock&) = delete;
  BufferBlock& operator=(const BufferBlock&) = delete;

 private:
  explicit BufferBlock(std::unique_ptr<SysvReleaseBoard> board) : board_(std::move(board)) {}

  std::unique_ptr<SysvReleaseBoard> board_;  // our own: the peers that map us attach it
  int device_ = -1;
  void* base_ = nullptr;  // null until allocated
  BlockLayout layout_{};
  cudaIpcMemHandle_t handle_{};
  PeerMappings peers_;  // the peers' blocks as mapped here
  std::unique_ptr<BlockMemory> memory_;  // behind base_; goes with the block, or with its retirement
};

}  // namespace car
