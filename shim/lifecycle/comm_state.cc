#include "lifecycle/comm_state.h"

#include "log.h"

namespace car {

bool CommState::stopKernels() {
  std::lock_guard<std::mutex> lock(engineMutex_);
  stopRequested.store(true);
  if (!engine) return false;
  engine->raiseAbort();
  return true;
}

void CommState::setEngine(std::unique_ptr<RankEngine> newEngine) {
  std::lock_guard<std::mutex> lock(engineMutex_);
  engine = std::move(newEngine);
  if (engine && stopRequested.load()) engine->raiseAbort();
}

std::unique_ptr<RankEngine> CommState::takeEngine() {
  std::lock_guard<std::mutex> lock(engineMutex_);
  return std::move(engine);
}

std::string describe(const CommState& state) {
  return logText(formatCommName, static_cast<const void*>(state.comm), state.rank, state.ranks);
}

}  // namespace car
