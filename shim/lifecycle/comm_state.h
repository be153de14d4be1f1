// Our side of one real communicator (one rank of it, in this process): who it is, where it is
// in its life, what it holds, and what its all-reduces did. Every change of phase goes through
// one method here, which checks that the change is allowed and logs it.
//
//   Pending ──beginSetUp──> SettingUp ──becomeReady──> Ready
//      │                        │                        │
//      └──────────── becomeIneligible(cause) ────────────┴──> Ineligible
//   Pending, SettingUp, Ready, Ineligible ──release──> Released
//
// Locking, all of it:
//  - The state's lock (lock(), a Locked view) covers the phase, the reason, the engine's use
//    and the block. An all-reduce holds it from its look at the phase through its launch, a
//    release through its drain, the handshake's conclusion through its verdict. phase() may
//    be read without it as a hint, to be checked again under it.
//  - requestStop() takes only a small lock of its own around the engine pointer, never the
//    state's lock: a launch blocked behind our spinning kernel may hold that one. The engine
//    pointer changes under both.
//  - Identity, the release flags, the counters, the gate and the symmetric windows are safe
//    to use from any thread without the state's lock.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "handshake/verdict.h"
#include "ipc/buffer_block.h"
#include "lifecycle/nccl_gate.h"
#include "lifecycle/symmetric_windows.h"
#include "rank_engine.h"
#include "stats.h"

namespace car {

enum class CommPhase {
  Pending,     // adopted; waits for its set-up point (shim/lifecycle/setup.h)
  SettingUp,   // a handshake has it (shim/handshake/handshake.h); it holds the block until it concludes
  Ready,       // set up and eligible: eligible all-reduces run on our kernels
  Ineligible,  // every all-reduce is forwarded (reason() says why)
  Released,    // destroyed, aborted or finalized
};

const char* phaseName(CommPhase phase);

// Whether a communicator in phase `from` may move to `to`: the arrows of the diagram above.
bool phaseChangeAllowed(CommPhase from, CommPhase to);

// What made a communicator Ineligible, and so the phase it came from and the line it logs.
enum class IneligibleCause {
  NoSetUp,       // Pending: it never reached a handshake (its init or its group failed)
  Verdict,       // SettingUp: the handshake's verdict
  NcclBroken,    // Ready: NCCL reports the communicator broken
  LaunchFailed,  // Ready: our launch failed
};

class CommState {
 public:
  CommState(ncclComm_t comm, bool nonblocking) : comm_(comm), nonblocking_(nonblocking) {}
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;

  ncclComm_t comm() const { return comm_; }
  // Set up lazily, never inside the creating call (shim/lifecycle/setup.h).
  bool nonblocking() const { return nonblocking_; }
  // What NCCL told the handshake; ranks() is 0 until then.
  int rank() const { return rank_.load(std::memory_order_relaxed); }
  int ranks() const { return ranks_.load(std::memory_order_acquire); }
  int device() const { return device_.load(std::memory_order_relaxed); }
  void learnIdentity(int rank, int ranks, int device);

  // Our own set-up calls on the communicator; closed by abort, destroy and finalize.
  NcclGate& gate() { return gate_; }
  SymmetricWindows& symmetricWindows() { return symmetricWindows_; }
  // What its all-reduces did; the engine counts into these as well.
  CallStats& counters() { return counters_; }

  // The phase as last set. Without the state's lock only a hint.
  CommPhase phase() const { return phase_.load(std::memory_order_acquire); }

  // ---- The release protocol (shim/lifecycle/release.h); none of these takes the state's lock.
  // ncclCommAbort, ncclCommRevoke or ncclCommShrink(NCCL_SHRINK_ABORT): our kernels are told
  // to stop, none starts after, and every later all-reduce goes to NCCL. Returns whether there
  // was an engine to tell.
  bool requestStop();
  bool stopRequested() const { return stopRequested_.load(); }
  // True for the one caller that releases our side; every later one gets false.
  bool claimRelease() { return !releaseClaimed_.exchange(true); }
  // An abort has reached NCCL: no other call of ours may reach NCCL on this communicator.
  void noteAbortReachedNccl() { abortReachedNccl_.store(true); }
  bool abortReachedNccl() const { return abortReachedNccl_.load(); }
  // True the first time only: one WARN for all-reduces refused while another thread releases.
  bool firstRefusal() { return !refusalWarned_.exchange(true); }
  // NCCL_CAR_DETERMINISTIC: bit r set once a call forwarded for ForwardReason r was WARNed.
  std::atomic<std::uint32_t>& invarianceWarned() { return invarianceWarned_; }

  class Locked;
  Locked lock();

 private:
  bool moveTo(CommPhase to);  // under the state's lock

  const ncclComm_t comm_;
  const bool nonblocking_;
  std::atomic<int> rank_{0};
  std::atomic<int> ranks_{0};
  std::atomic<int> device_{0};

  NcclGate gate_;
  SymmetricWindows symmetricWindows_;
  CallStats counters_;

  std::atomic<bool> stopRequested_{false};
  std::atomic<bool> releaseClaimed_{false};
  std::atomic<bool> abortReachedNccl_{false};
  std::atomic<bool> refusalWarned_{false};
  std::atomic<std::uint32_t> invarianceWarned_{0};

  std::mutex mutex_;  // the state's lock
  std::atomic<CommPhase> phase_{CommPhase::Pending};  // written under mutex_
  std::string reason_;                                 // why Ineligible
  std::unique_ptr<BufferBlock> block_;                 // from Ready on
  std::mutex engineMutex_;  // only ever held for a pointer swap or one flag store
  std::unique_ptr<RankEngine> engine_;  // from the handshake's allocation on
};

// The state under its lock: the only way to change its phase or to use its engine.
class CommState::Locked {
 public:
  explicit Locked(CommState& state) : state_(state), lock_(state.mutex_) {}

  CommPhase phase() const { return state_.phase(); }
  const std::string& reason() const { return state_.reason_; }

  // Pending -> SettingUp: the caller's handshake takes it. False when it is not Pending
  // (set up, being set up, or released meanwhile).
  bool beginSetUp();
  // The engine the handshake made for it, before the handshake concludes. From here on an
  // abort reaches it (requestStop), set up or not.
  void installEngine(std::unique_ptr<RankEngine> engine);
  // SettingUp -> Ready, with the engine attached to `block` and its peers'. False (and the
  // block retired) when that cannot be: not SettingUp, or no engine.
  bool becomeReady(std::unique_ptr<BufferBlock> block, const Verdict& verdict);
  // -> Ineligible from the phase `cause` belongs to; false, with nothing changed, from any
  // other (NoSetUp: the communicator was released or set up meanwhile).
  bool becomeIneligible(IneligibleCause cause, const std::string& reason);
  // -> Released. Returns the phase it left; nothing when it was released already.
  std::optional<CommPhase> release();

  // An all-reduce: whether it may go to the engine (Ready, no stop asked). When not, it is
  // counted as forwarded: not ready before set-up ends, not eligible after; once released,
  // not at all.
  bool takesCall();
  RankEngine* engine() const { return state_.engine_.get(); }
  std::unique_ptr<RankEngine> takeEngine();
  std::unique_ptr<BufferBlock> takeBlock() { return std::move(state_.block_); }

 private:
  CommState& state_;
  std::unique_lock<std::mutex> lock_;
};

inline CommState::Locked CommState::lock() { return Locked(*this); }

// "comm 0x... rank 1/4", the prefix of every log line about a communicator.
std::string describe(const CommState& state);

}  // namespace car
