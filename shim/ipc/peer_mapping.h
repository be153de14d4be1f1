// Maps every peer's buffer block into this process: a peer in the same process by its
// pointer (with peer access enabled across devices), another process's by CUDA IPC.
// An IPC handle can be opened only once per process ("already mapped"), so opened handles
// are shared process-wide and reference-counted. Before mapping a peer's block we attach
// its release board, and leave it only after our mapping is closed (shim/ipc/release_board.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "handshake/handshake_record.h"
#include "ipc/release_board.h"

namespace car {

class PeerMappings {
 public:
  PeerMappings() = default;
  ~PeerMappings() { unmapAll(); }
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;

  // Fills bases[r] with rank r's block as seen here (our own at myRank). On failure
  // unmaps what it mapped and describes the first problem.
  bool mapAll(const std::vector<HandshakeRecord>& records, int myRank, int myDevice, void* myBase,
              std::vector<void*>* bases, std::string* problem);
  // Closes our mappings (each on the device that opened it), then leaves the peers' boards.
  // Our kernels must have ended.
  void unmapAll();

 private:
  std::vector<std::string> openedHandles_;  // keys into the process-wide cache
  std::vector<std::unique_ptr<SysvReleaseBoard>> boards_;  // the peers' boards we attached
};

}  // namespace car
