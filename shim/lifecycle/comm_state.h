// Our side-state of one real communicator (one rank of it, in this process).
#pragma once

#include <nccl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "ipc/buffer_block.h"
#include "lifecycle/nccl_gate.h"
#include "rank_engine.h"
#include "stats.h"
#include "lifecycle/symmetric_windows.h"

namespace car {

enum class CommPhase {
  // Waiting for the real communicator or its group, or in the handshake. A handshake uses
  // engine and peers without the lock (it may wait in a collective for long): a release
  // meanwhile only marks the state Released, and the handshake frees them when it ends.
  Pending,
  Ready,       // set up and eligible: eligible all-reduces run on our kernels
  Ineligible,  // set up, not eligible (reason says why): every all-reduce is forwarded
  Released,    // destroyed, aborted or finalized
};

struct CommState {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int ranks = 0;
  int device = 0;
  bool nonblocking = false;       // set up lazily, never inside the creating call
  bool allReduceInGroup = false;  // a pending nonblocking comm met an all-reduce in a group

  NcclGate gate;  // our own set-up calls on comm; closed by abort, destroy and finalize

  // ncclCommAbort, ncclCommRevoke or ncclCommShrink(NCCL_SHRINK_ABORT) came: our kernels
  // are told to stop and every later all-reduce goes to NCCL.
  std::atomic<bool> stopRequested{false};
  std::atomic<bool> releaseClaimed{false};    // one thread releases our side, once
  std::atomic<bool> abortReachedNccl{false};  // no other call of ours reaches NCCL then

  std::mutex mutex;               // guards everything below against setup/teardown races
  // Written under the mutex; atomic so the all-reduce hook may peek at it without the lock.
  std::atomic<CommPhase> phase{CommPhase::Pending};
  std::string reason;             // why Ineligible
  // Set and taken under engineMutex as well (see stopKernels), read by whoever owns the
  // phase: the handshake while Pending, launches and release under `mutex` after. The
  // same holds for the block.
  std::unique_ptr<RankEngine> engine;
  std::unique_ptr<BufferBlock> block;  // ours, and our view of the peers' (shim/ipc/buffer_block.h)
  std::atomic<bool> failureWarned{false};
  std::atomic<bool> refusalWarned{false};
  SymmetricWindows symmetricWindows;  // its own lock: registered from any thread

  CallStats counters;  // what its all-reduces did; the engine counts into these too

  // Tells our kernels of this communicator to stop and no new one to start. Takes only
  // engineMutex, never `mutex`: a launch blocked behind our spinning kernel may hold that.
  // Returns whether there was an engine to stop.
  bool stopKernels();
  void setEngine(std::unique_ptr<RankEngine> newEngine);
  std::unique_ptr<RankEngine> takeEngine();

 private:
  std::mutex engineMutex_;  // only ever held for a pointer swap or one flag store
};

// "comm 0x... rank 1/4", the prefix of every log line about a communicator.
std::string describe(const CommState& state);

}  // namespace car
