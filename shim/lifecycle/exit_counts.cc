#include "lifecycle/exit_counts.h"

#include <cstdlib>

#include "lifecycle/registry.h"
#include "log.h"

namespace car {
namespace {

// Runs inside exit(): other threads may still run, NCCL may have torn itself down, CUDA may
// be unloading. So: a copy of the registry's list, atomics read, one line each, logged
// with the state's own device (a device of -1 would ask CUDA for one).
void sayAliveCounts() {
  for (const std::shared_ptr<Communicator>& state : Registry::instance().snapshot()) {
    const CommPhase phase = state->phase();
    // As at a release: a communicator never set up (or still setting up) logs nothing.
    if (phase == CommPhase::Pending || phase == CommPhase::SettingUp || phase == CommPhase::Released) continue;
    CAR_INFO(state->device(), "{}",
             logText(formatAliveAtExit, describe(*state).c_str(), state->counters().summary().c_str()));
  }
}

}  // namespace

void reportCountsAtExit() {
  static const bool registered = std::atexit(&sayAliveCounts) == 0;
  static_cast<void>(registered);
}

}  // namespace car
