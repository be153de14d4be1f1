// Our own NCCL calls on one communicator (the set-up's queries and its exchange, made on the
// program's thread inside a hook) pass this gate. ncclCommAbort, ncclCommDestroy and
// ncclCommFinalize close it before they reach NCCL: closing waits for our calls in flight, and
// none starts after it, so we never call NCCL on a communicator it is freeing. The wait is
// bounded: a call of ours that NCCL itself keeps blocked (a peer that never comes) is left to
// NCCL, whose abort is made to interrupt such calls.
//
// A program's own call forwarded to NCCL does not pass it: it races with the program's abort
// exactly as it would without us. It only looks whether the gate is closed, so that a call
// made after the abort took the communicator is refused rather than sent to freed memory.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace car {

class CallGate {
 public:
  // False when closed (nothing to leave). Sequentially consistent with close(): either close
  // sees this call inside, or this call sees the gate closed.
  bool enter() {
    inside_.fetch_add(1, std::memory_order_seq_cst);
    if (!closed_.load(std::memory_order_seq_cst)) return true;
    leave();
    return false;
  }
  void leave() { inside_.fetch_sub(1, std::memory_order_release); }

  // Runs call() unless the gate is closed; returns whether it ran.
  template <typename Call>
  bool pass(Call&& call) {
    if (!enter()) return false;
    call();
    leave();
    return true;
  }

  // After this returns no call of ours starts. Returns false if one in flight is still
  // running after `seconds`.
  bool close(double seconds) {
    closed_.store(true, std::memory_order_seq_cst);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (inside_.load(std::memory_order_acquire) != 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  bool closed() const { return closed_.load(std::memory_order_acquire); }

 private:
  std::atomic<int> inside_{0};
  std::atomic<bool> closed_{false};
};

// How long abort, destroy and finalize wait for a set-up call of ours in flight.
constexpr double kGateCloseSeconds = 5.0;

}  // namespace car
