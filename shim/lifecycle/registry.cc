#include "lifecycle/registry.h"

namespace car {

Registry& Registry::instance() {
  static auto* registry = new Registry();  // never destroyed: hooks may run during exit
  return *registry;
}

void Registry::add(const std::shared_ptr<CommState>& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  states_[state->comm()] = state;
}

std::shared_ptr<CommState> Registry::find(ncclComm_t comm) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = states_.find(comm);
  return it == states_.end() ? nullptr : it->second;
}

void Registry::forget(const std::shared_ptr<CommState>& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = states_.find(state->comm());
  if (it != states_.end() && it->second == state) states_.erase(it);
}

}  // namespace car
