#include "registry.h"

#include <fmt/format.h>

namespace car {

std::string describe(const CommState& state) {
  if (state.ranks == 0) return fmt::format("comm {} rank ?/?", static_cast<const void*>(state.comm));
  return fmt::format("comm {} rank {}/{}", static_cast<const void*>(state.comm), state.rank, state.ranks);
}

Registry& Registry::instance() {
  static auto* registry = new Registry();  // never destroyed: hooks may run during exit
  return *registry;
}

void Registry::add(const std::shared_ptr<CommState>& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  states_[state->comm] = state;
}

std::shared_ptr<CommState> Registry::find(ncclComm_t comm) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = states_.find(comm);
  return it == states_.end() ? nullptr : it->second;
}

std::shared_ptr<CommState> Registry::remove(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = states_.find(comm);
  if (it == states_.end()) return nullptr;
  std::shared_ptr<CommState> state = std::move(it->second);
  states_.erase(it);
  return state;
}

std::size_t Registry::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return states_.size();
}

}  // namespace car
