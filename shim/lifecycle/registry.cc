#include "lifecycle/registry.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "lifecycle/exit_counts.h"
#include "log.h"

namespace car {
namespace {

// The calling thread's last lookup: good while the registry's generation is the one it saw.
struct LastLookup {
  std::uint64_t generation = 0;
  ncclComm_t comm = nullptr;
  std::shared_ptr<Communicator> found;
};
thread_local LastLookup tLast;

}  // namespace

Registry& Registry::instance() {
  static auto* registry = new Registry();  // never destroyed: hooks may run during exit
  return *registry;
}

Registry::Registry() {
  pthread_atfork(&Registry::lockForFork, &Registry::unlockAfterForkInParent, &Registry::setAsideAfterForkInChild);
  // Registered after ours where it was not yet (prepare handlers run in reverse order): a
  // fork then waits for a line being written before it holds our lock, which every hooked
  // call takes. Either order is free of deadlock: nothing logs under our lock.
  readyLogForFork();
  reportCountsAtExit();  // after the log exists: its handler runs before the log's statics go
}

// Held across fork(): the child's copy of the table is then whole, and its lock free.
void Registry::lockForFork() {
  Registry& registry = instance();
  registry.mutex_.lock();
  if (registry.forkSpare_ == nullptr) registry.forkSpare_ = new Table();  // in the parent: may allocate
}

void Registry::unlockAfterForkInParent() { instance().mutex_.unlock(); }

// In the child of a threaded program: a swap only (no allocation, no free, no log, no other lock).
void Registry::setAsideAfterForkInChild() {
  Registry& registry = instance();
  registry.forkSpare_->swap(registry.states_);
  registry.inheritedUnsaid_.store(registry.forkSpare_->size());
  registry.forkSpare_ = nullptr;  // the inheritance, left alone for good
  registry.generation_.fetch_add(1);  // the forking thread's last lookup is the parent's
  registry.mutex_.unlock();
}

void Registry::sayInheritedOnce() const {
  if (inheritedUnsaid_.load(std::memory_order_relaxed) == 0) return;
  const std::size_t count = inheritedUnsaid_.exchange(0);
  if (count == 0) return;
  CAR_INFO(-1, "process {} is a fork()ed child: the {} communicator(s) it inherited are NCCL's alone here (our "
           "buffers stay the parent's)", getpid(), count);
}

std::shared_ptr<Communicator> Registry::add(const std::shared_ptr<Communicator>& comm) {
  sayInheritedOnce();
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<Communicator>& slot = states_[comm->comm()];
  std::shared_ptr<Communicator> displaced = std::move(slot);
  slot = comm;
  generation_.fetch_add(1);
  return displaced;
}

const std::shared_ptr<Communicator>& Registry::find(ncclComm_t comm) const {
  const std::uint64_t generation = generation_.load(std::memory_order_acquire);
  if (tLast.generation == generation && tLast.comm == comm) return tLast.found;
  sayInheritedOnce();
  std::lock_guard<std::mutex> lock(mutex_);
  tLast.generation = generation_.load(std::memory_order_relaxed);
  tLast.comm = comm;
  tLast.found = findLocked(comm);
  return tLast.found;
}

std::shared_ptr<Communicator> Registry::findLocked(ncclComm_t comm) const {
  auto it = states_.find(comm);
  return it == states_.end() ? nullptr : it->second;
}

bool Registry::holds(const std::shared_ptr<Communicator>& comm) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return findLocked(comm->comm()) == comm;
}

void Registry::forget(const std::shared_ptr<Communicator>& comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = states_.find(comm->comm());
  if (it != states_.end() && it->second == comm) {
    states_.erase(it);
    generation_.fetch_add(1);
  }
}

std::vector<std::shared_ptr<Communicator>> Registry::snapshot() const {
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  for (int tries = 0; !lock.try_lock(); ++tries) {
    if (tries == 100) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<std::shared_ptr<Communicator>> states;
  for (const auto& [comm, state] : states_) states.push_back(state);
  return states;
}

}  // namespace car
