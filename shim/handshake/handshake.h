// The setup handshake of a batch of communicators: two all-gathers over each real
// communicator (records, then link reports), the batch's collectives issued in one group.
#pragma once

#include <memory>
#include <vector>

#include "lifecycle/comm_state.h"
#include "exports/real_nccl.h"

namespace car {

// Sets every Pending state of the batch to Ready or Ineligible, and logs the verdict.
void runHandshakes(const RealNccl& real, const std::vector<std::shared_ptr<CommState>>& states);

}  // namespace car
