// Our own NCCL calls on one communicator (the set-up's queries, polls and all-gathers) pass
// this gate, and so does a caller's collective from our look at the communicator to its call
// of NCCL. ncclCommAbort, ncclCommDestroy and ncclCommFinalize close it before they reach
// NCCL: closing waits for the call in flight, and none starts after it, so we never call
// NCCL on a communicator it is freeing. The wait is bounded: a call of ours
// that NCCL itself keeps blocked (a peer that never comes) is left to NCCL, whose abort is
// made to interrupt such calls.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace car {

class NcclGate {
 public:
  // Runs call() unless the gate is closed; returns whether it ran.
  template <typename Call>
  bool pass(Call&& call) {
    if (!enter()) return false;
    call();
    leave();
    return true;
  }

  // For a poll that can come again later (the set-up worker's): runs call() only if the gate
  // is open and free now, never waiting behind a caller's call inside NCCL.
  enum class Attempt { Ran, Busy, Closed };
  template <typename Call>
  Attempt tryPass(Call&& call) {
    if (!mutex_.try_lock()) return closed_.load() ? Attempt::Closed : Attempt::Busy;
    if (closed_.load()) {
      mutex_.unlock();
      return Attempt::Closed;
    }
    call();
    mutex_.unlock();
    return Attempt::Ran;
  }

  // For calls that span several communicators (one group of all-gathers): enter() every
  // gate first; false means closed (nothing to leave).
  bool enter() {
    mutex_.lock();
    if (!closed_.load()) return true;
    mutex_.unlock();
    return false;
  }
  void leave() { mutex_.unlock(); }

  // enter() for a scope; entered() says whether it did.
  class Hold {
   public:
    explicit Hold(NcclGate& gate) : gate_(gate), entered_(gate.enter()) {}
    ~Hold() {
      if (entered_) gate_.leave();
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    bool entered() const { return entered_; }

   private:
    NcclGate& gate_;
    const bool entered_;
  };

  // After this returns no call of ours starts. Returns false if the one in flight is still
  // running after `seconds`.
  bool close(double seconds) {
    closed_.store(true);
    // Polled try_lock, not a timed lock: ThreadSanitizer does not see timed locks taken.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!mutex_.try_lock()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    mutex_.unlock();
    return true;
  }

  bool closed() const { return closed_.load(); }

 private:
  std::mutex mutex_;
  std::atomic<bool> closed_{false};
};

// How long abort, destroy and finalize wait for a set-up call of ours in flight.
constexpr double kGateCloseSeconds = 5.0;

}  // namespace car
