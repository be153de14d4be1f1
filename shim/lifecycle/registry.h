// Side table from the real ncclComm_t to our side of it, shared by all threads. A lookup is
// one atomic load when the thread looked the same communicator up last (the usual case: a
// thread making calls on one communicator); otherwise a lock and a hash lookup.
//
// A fork()ed child inherits the table but not what its states stand on: CUDA, the mappings
// of the peers' blocks, the release board (kept out of children, shim/ipc/release_board.cc).
// In the child the parent's states are set aside at the fork, never touched or freed, so
// every call on an inherited communicator is NCCL's alone there.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "lifecycle/communicator.h"

namespace car {

class Registry {
 public:
  static Registry& instance();
  // Registers it. Returns the one it displaced, if any: a communicator at the same
  // address that NCCL freed without our hooks seeing it (called through a handle to the
  // real NCCL), which the caller must still release.
  std::shared_ptr<Communicator> add(const std::shared_ptr<Communicator>& state);
  // Null when none. The reference is the calling thread's last lookup: good until its next
  // one (copy it to keep it longer).
  const std::shared_ptr<Communicator>& find(ncclComm_t comm) const;
  // Whether it is this process's: false for one a fork()ed child inherited (a group the
  // parent's thread had open at the fork still lists it there).
  bool holds(const std::shared_ptr<Communicator>& state) const;
  // Removes it, if it is still the one registered for its handle.
  void forget(const std::shared_ptr<Communicator>& state);
  // Every communicator registered now; empty when the table stays locked for 100 ms (at exit:
  // a thread of the program may be inside a hook).
  std::vector<std::shared_ptr<Communicator>> snapshot() const;

 private:
  using Table = std::unordered_map<ncclComm_t, std::shared_ptr<Communicator>>;
  std::shared_ptr<Communicator> findLocked(ncclComm_t comm) const;
  Registry();
  static void lockForFork();
  static void unlockAfterForkInParent();
  static void setAsideAfterForkInChild();
  // Once per child, at its first look at the table: one INFO that the inherited ones are NCCL's.
  void sayInheritedOnce() const;

  mutable std::mutex mutex_;
  Table states_;
  // Changes with every add, forget and fork: a thread's last lookup is good while it holds.
  std::atomic<std::uint64_t> generation_{1};
  // Made before a fork, in the parent; in the child it takes the inherited states and is
  // never touched or freed again (so nor are they). Unused by a parent, it waits for the next fork.
  Table* forkSpare_ = nullptr;
  mutable std::atomic<std::size_t> inheritedUnsaid_{0};  // a child's inherited states, until said
};

}  // namespace car
