// What every rank tells every other rank at set-up, in the one all-gather over the real
// communicator (the records), and then in the ranks' boards (shim/ipc/board_page.h: the
// link reports, the blocks' handles). Plain fixed-size data: it travels as bytes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "config.h"
#include "handshake/p2p_limit.h"
#include "ipc/board_page.h"

namespace car {

// A text field as sent by a peer, read no further than the field: a peer's record is
// bytes, not a promise of a terminating NUL.
template <std::size_t N>
std::string fieldText(const char (&field)[N]) {
  return std::string(field, strnlen(field, N));
}

constexpr std::uint32_t kHandshakeMagic = 0x43415239;  // "CAR9": layout and protocol version

// Whether a rank could take part at all; anything but Ready makes the whole
// communicator forward.
enum class RankStatus : std::uint32_t {
  Ready = 0,
  NoBuffers = 1,      // (CAR7) buffers now fail after the exchange, in the board's report
  NoDevice = 2,       // CUDA unusable on this rank
  NoBoard = 3,        // the release board (shim/ipc/release_board.h) could not be created
  NoRoom = 4,         // one more block would exceed NCCL_CAR_GPU_MEMORY_BYTES on this rank's GPU
  Failed = 5,         // an internal error on this rank before the exchange (its WARN says which)
};

// The records' all-gather: identity, device and settings of each rank, and where its board is.
struct HandshakeRecord {
  std::uint32_t magic;
  RankStatus status;
  std::int32_t rank;
  std::int32_t ranks;
  std::int32_t pid;
  std::int32_t cudaDevice;     // ordinal in the owner's process
  std::int32_t computeCapability;  // major * 10 + minor of the rank's GPU
  std::int32_t boardId;        // System V id of the rank's board (release and set-up), -1 if none
  std::uint64_t ipcNamespace;
  std::uint64_t pidNamespace;
  std::uint64_t boardToken;    // the board's token (shim/ipc/board_page.h)
  char host[128];              // "hostname/boot-id", NUL-terminated
  char busId[32];              // PCI bus id of the rank's GPU
  SharedSettings settings;
  std::int32_t p2pLimit;       // P2pLimit: NCCL_P2P_DISABLE / NCCL_P2P_LEVEL on this rank
  std::int32_t reserved;
};

// The record travels through NCCL as bytes, the link report (shim/ipc/board_page.h) through
// the boards: plain data only.
static_assert(std::is_trivially_copyable_v<HandshakeRecord> && std::is_standard_layout_v<HandshakeRecord>);
// Layout "CAR9" on the wire. Changing either struct fails this on purpose: bump
// kHandshakeMagic, then write the new sizes here. Bump it too when the buffer block's layout
// changes (kernels/rank_signal.h): peers write into each other's blocks at offsets both must
// compute alike; when the board page's layout changes (shim/ipc/board_page.h); and when the
// exchanges change, so that the ranks must take part in other ones. CAR5: PushState holds 256
// area copies (was 128). CAR6: the records go twice, the blocks only in the second (ranks of
// different versions may wait in an all-gather the other never makes: every rank must load
// the same library). CAR7: the shared settings carry the all-gather and reduce-scatter limits
// and the choice table's digest. CAR8: one exchange through NCCL; the blocks' handles and the
// link reports go through the boards, whose token the record carries. CAR9: the link reports
// carry NVML's P2P write status and the PCIe path to each peer; p2pLimit has PCIe levels.
static_assert(kHandshakeMagic == 0x43415239 && sizeof(HandshakeRecord) == 280 && sizeof(LinkReport) == 128,
              "the handshake's wire format changed: bump kHandshakeMagic and update these sizes");
// Bit p of each mask is rank p.
static_assert(kMaxRanks <= 8 * sizeof(LinkReport::p2pMask) && kMaxRanks <= 8 * sizeof(LinkReport::nvlinkMask) &&
                  kMaxRanks <= 8 * sizeof(LinkReport::nvmlWriteMask),
              "LinkReport's rank masks must hold a bit for every rank");

}  // namespace car
