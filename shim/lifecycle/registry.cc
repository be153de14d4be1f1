#include "lifecycle/registry.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "lifecycle/exit_counts.h"
#include "log.h"

namespace car {

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
  registry.mutex_.unlock();
}

void Registry::sayInheritedOnce() const {
  if (inheritedUnsaid_.load(std::memory_order_relaxed) == 0) return;
  const std::size_t count = inheritedUnsaid_.exchange(0);
  if (count == 0) return;
  CAR_INFO(-1, "process {} is a fork()ed child: the {} communicator(s) it inherited are NCCL's alone here (our "
           "buffers stay the parent's)", getpid(), count);
}

std::shared_ptr<CommState> Registry::add(const std::shared_ptr<CommState>& state) {
  sayInheritedOnce();
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<CommState>& slot = states_[state->comm()];
  std::shared_ptr<CommState> displaced = std::move(slot);
  slot = state;
  return displaced;
}

std::shared_ptr<CommState> Registry::find(ncclComm_t comm) const {
  sayInheritedOnce();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = states_.find(comm);
  return it == states_.end() ? nullptr : it->second;
}

bool Registry::holds(const std::shared_ptr<CommState>& state) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = states_.find(state->comm());
  return it != states_.end() && it->second == state;
}

void Registry::forget(const std::shared_ptr<CommState>& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = states_.find(state->comm());
  if (it != states_.end() && it->second == state) states_.erase(it);
}

std::vector<std::shared_ptr<CommState>> Registry::snapshot() const {
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  for (int tries = 0; !lock.try_lock(); ++tries) {
    if (tries == 100) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<std::shared_ptr<CommState>> states;
  for (const auto& [comm, state] : states_) states.push_back(state);
  return states;
}

}  // namespace car
