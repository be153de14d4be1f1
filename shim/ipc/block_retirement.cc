#include "ipc/block_retirement.h"

#include <chrono>
#include <thread>

#include "log.h"

namespace car {
namespace {

class SteadyClock final : public RetirementClock {
 public:
  double seconds() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void pause() override { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }
};

}  // namespace

void BlockRetirement::retire(RetiringBlock block, bool wait) {
  block.board->retire();
  const double start = clock_.seconds();
  int left = block.board->importers();
  // Only importers of other processes are worth a wait: ours release after us.
  while (wait && left > 0 && block.board->importersHere() == 0 && clock_.seconds() - start < waitSeconds_) {
    clock_.pause();
    left = block.board->importers();
  }
  if (left == 0) {
    block.free();
    if (clock_.seconds() - start > 0.001) {
      CAR_INFO(block.device, "{} buffers back in the pool once every peer had let go of them ({:.3f} s)", block.who,
               clock_.seconds() - start);
    }
  } else {
    if (left < 0) {
      CAR_INFO(block.device, "{} buffers kept allocated: cannot tell whether a peer still maps them", block.who);
    } else {
      CAR_INFO(block.device, "{} buffers kept allocated: {} peer rank(s) still map them; a later release in this "
               "process puts them back in the pool once they let go", block.who, left);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    kept_.push_back(std::move(block));
  }
  sweep();
}

void BlockRetirement::sweep() {
  std::vector<RetiringBlock> free;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = kept_.begin(); it != kept_.end();) {
      if (it->board->importers() == 0) {
        free.push_back(std::move(*it));
        it = kept_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Outside the lock: letting go takes the pool's lock.
  for (RetiringBlock& block : free) {
    block.free();
    CAR_INFO(block.device, "{} buffers kept at release back in the pool: every peer has let go of them", block.who);
  }
}

std::size_t BlockRetirement::kept() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_.size();
}

BlockRetirement& blockRetirement() {
  static auto* clock = new SteadyClock();
  static auto* retirement = new BlockRetirement(*clock, kImporterWaitSeconds);
  return *retirement;
}

}  // namespace car
