// Side table from the real ncclComm_t to our state, shared by all threads.
#pragma once

#include <nccl.h>

#include <memory>
#include <mutex>
#include <unordered_map>

#include "lifecycle/comm_state.h"

namespace car {

class Registry {
 public:
  static Registry& instance();
  void add(const std::shared_ptr<CommState>& state);
  std::shared_ptr<CommState> find(ncclComm_t comm) const;
  // Removes the state, if it is still the one registered for its communicator.
  void forget(const std::shared_ptr<CommState>& state);

 private:
  mutable std::mutex mutex_;
  std::unordered_map<ncclComm_t, std::shared_ptr<CommState>> states_;
};

}  // namespace car
