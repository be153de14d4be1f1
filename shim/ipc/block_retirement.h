// Lets go of a rank's buffer block once no importer is left (shim/ipc/release_board.h): its
// memory goes back to the pool for the next block (shim/ipc/block_memory.h), never to
// cudaFree. Bounded in time: never a destroy that hangs on a peer. The owner waits a little for importers in
// other processes, which are usually releasing at the same moment; an importer in this
// process releases later on this side, so waiting for it would be pointless (and, from one
// thread driving several GPUs, endless). What is still imported then is kept and let go by
// a later release in this process, once its importers let go; if none comes, it goes with
// the process.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ipc/release_board.h"

namespace car {

// Time as retirement sees it (a fake one in the CPU tests).
class RetirementClock {
 public:
  virtual ~RetirementClock() = default;
  virtual double seconds() = 0;  // monotonic
  virtual void pause() = 0;      // between two looks at the importers
};

struct RetiringBlock {
  std::unique_ptr<ReleaseBoard> board;  // the owner's attachment
  std::function<void()> free;           // lets go of the block's memory (and what lives with it)
  std::string who;                      // "comm 0x... rank r/n", for the log
  int device = -1;
};

class BlockRetirement {
 public:
  BlockRetirement(RetirementClock& clock, double waitSeconds) : clock_(clock), waitSeconds_(waitSeconds) {}
  // Retires the block (waiting a little for importers in other processes when `wait`), then
  // lets go of whatever kept block no importer holds any more.
  void retire(RetiringBlock block, bool wait = true);
  // Lets go of every kept block no importer holds any more.
  void sweep();
  std::size_t kept() const;

 private:
  RetirementClock& clock_;
  const double waitSeconds_;
  mutable std::mutex mutex_;
  std::vector<RetiringBlock> kept_;
};

// The process-wide one, with the real clock. Never destroyed: releases may run at exit.
BlockRetirement& blockRetirement();

// How long a release waits for importers in other processes.
constexpr double kImporterWaitSeconds = 2.0;

}  // namespace car
