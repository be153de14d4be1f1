// Maps every peer's buffer block into this process: a peer in the same process by its
// pointer (with peer access enabled across devices), another process's by CUDA IPC.
// An IPC handle can be opened only once per process ("already mapped"), so opened handles
// are shared process-wide and reference-counted. A peer's block is mapped only behind its
// release board, attached before (by the set-up) and left only after our mapping is closed
// (shim/ipc/release_board.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ipc/board_page.h"
#include "ipc/release_board.h"

namespace car {

// Where a peer's block lives, as the set-up's records tell (shim/handshake/handshake.cc).
struct PeerLocation {
  bool sameProcess = false;  // mapped by its pointer, not through IPC
  int cudaDevice = -1;       // the peer's ordinal, in this process when sameProcess
  std::string busId;         // PCI bus id of the peer's GPU
};

class PeerMappings {
 public:
  PeerMappings() = default;
  ~PeerMappings() { unmapAll(); }
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;

  // Fills bases[r] with rank r's block as seen here (our own at myRank), from where it lives
  // and the block it published; keeps `boards` (the peers' boards, boards[r] for rank r, null
  // at myRank) until unmapAll. A board whose owner retired meanwhile is not mapped. On failure
  // unmaps what it mapped and describes the first problem.
  bool mapAll(const std::vector<PeerLocation>& peers, const std::vector<PublishedBlock>& blocks,
              std::vector<std::unique_ptr<SysvReleaseBoard>> boards, int myRank, int myDevice, void* myBase,
              std::vector<void*>* bases, std::string* problem);
  // Closes our mappings (each on the device that opened it), then leaves the peers' boards.
  // Our kernels must have ended.
  void unmapAll();
  // The peers' pages by rank (null at ours and when unmapped).
  std::vector<BoardPage*> boardPages() const;

 private:
  std::vector<std::string> openedHandles_;  // keys into the process-wide cache
  std::vector<std::unique_ptr<SysvReleaseBoard>> boards_;  // the peers' boards, by rank
};

}  // namespace car
