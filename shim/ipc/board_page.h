// What one rank's board page holds (shim/ipc/release_board.h makes and attaches the page):
// the release protocol's flag, and what the rank's set-up publishes for its peers once the
// one exchange through NCCL has told them the board's id (shim/handshake/setup_board.h).
// The page is shared memory between processes: every field a peer reads while the owner may
// write it is an atomic, and each published item is final once its flag is set (release
// store, acquire load).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "../kernels/hard_limits.h"


namespace car {

// What each rank found when it tried to reach every peer, published in its board. Each rank
// can only judge its own row; the verdict uses everybody's (shim/handshake/verdict.h).
struct LinkReport {
  std::uint32_t magic;         // the set-up's layout and protocol (shim/handshake/handshake_record.h)
  std::uint32_t mapped;        // 1: every peer's block is mapped here
  std::uint32_t p2pMask;       // bit p: this rank's GPU can read rank p's memory
  std::uint32_t nvlinkMask;    // bit p: NVLink to rank p's GPU (same GPU counts)
  std::uint32_t nvmlMissing;   // 1: NVML could not be loaded here, NVLink to other GPUs unknown
  // bit p: NVML says this GPU may write rank p's GPU's memory (P2P write status OK; the same
  // GPU counts). Over PCIe the verdict wants it beside CUDA's peer access (p2pMask).
  std::uint32_t nvmlWriteMask;
  std::uint8_t pciePath[kMaxRanks];  // the PCIe path to rank p's GPU, from NVML (shim/handshake/p2p_limit.h)
  char problem[96];            // why mapping failed, NUL-terminated
};
static_assert(std::is_trivially_copyable_v<LinkReport> && std::is_standard_layout_v<LinkReport>);

// A rank's block as its peers map it: its address in the owner's process and its IPC handle.
struct PublishedBlock {
  std::uint64_t address = 0;
  cudaIpcMemHandle_t handle{};
};

struct BoardPage {
  std::atomic<std::uint32_t> retired;  // the owner is releasing its block (shim/ipc/block_retirement.h)
  std::uint32_t reserved;
  // Random, written before the id is sent: an id that outlived its page and was given to
  // another one (System V reuses ids) is refused at attach.
  std::uint64_t token;

  // ---- The set-up (shim/handshake/setup_board.h).
  std::atomic<std::uint32_t> blockPublished;   // 1: blockAddress and handle are final
  std::atomic<std::uint32_t> reportPublished;  // 1: report is final (a failed set-up publishes one too)
  std::uint64_t blockAddress;                  // in the owner's address space
  cudaIpcMemHandle_t handle;                   // of the whole block
  LinkReport report;
  // The owner's part in the agreement on the first call every rank takes: 0 until it is
  // ready, then kSlotReady | the number of its calls it may have forwarded.
  std::atomic<std::uint64_t> slot;
  // Rank 0's page only: the agreement itself (shim/handshake/setup_board.h, CallSwitch).
  std::atomic<std::uint64_t> firstTaken;
};

constexpr std::size_t kBoardPageBytes = 4096;
static_assert(sizeof(BoardPage) <= kBoardPageBytes, "the board is one page");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free,
              "atomics shared between processes must be lock-free");
static_assert(std::is_standard_layout_v<BoardPage>, "the page is read by other processes at the same offsets");

}  // namespace car
