// Our side of one real communicator (one rank of it, in this process): who it is, where it is
// in its life, what it holds, and what its all-reduces did. Every change of phase goes through
// one method here, which checks that the change is allowed and logs it.
//
//   Pending ──beginSetUp──> SettingUp ──beginAgreeing──> Agreeing ──follow(decided)──> Ready
//      │                        │                            │                          │
//      └──────────────────── becomeIneligible(cause) ────────┴──────────────────────────┴──> Ineligible
//   every phase but Released ──release──> Released
//
// Locking, all of it:
//  - The state's lock (lock(), a Locked view) covers the phase, the reason, the engine's use,
//    the block, the call count and the agreement on the first call taken. An all-reduce holds
//    it from its look at the phase through its launch, a release through its drain, the
//    set-up's conclusion through its verdict. phase() may be read without it as a hint, to be
//    checked again under it.
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

#include "handshake/setup_board.h"
#include "handshake/verdict.h"
#include "ipc/buffer_block.h"
#include "lifecycle/nccl_gate.h"
#include "lifecycle/symmetric_windows.h"
#include "rank_engine.h"
#include "stats.h"

namespace car {

enum class CommPhase {
  Pending,     // adopted; waits for its set-up point (shim/lifecycle/setup.h)
  SettingUp,   // a set-up has it (shim/handshake/handshake.h); it holds the block until it concludes
  Agreeing,    // set up and eligible; the ranks agree on the first call our kernels take (setup_board.h)
  Ready,       // agreed: from that call on, eligible all-reduces run on our kernels
  Ineligible,  // every all-reduce is forwarded (reason() says why)
  Released,    // destroyed, aborted or finalized
};

const char* phaseName(CommPhase phase);

// Whether a communicator in phase `from` may move to `to`: the arrows of the diagram above.
bool phaseChangeAllowed(CommPhase from, CommPhase to);

// What made a communicator Ineligible, and so the phase it came from and the line it logs.
enum class IneligibleCause {
  NoSetUp,       // Pending: it never reached a set-up (its init or its group failed)
  Verdict,       // SettingUp: the set-up's verdict, its failure, or its time running out
  NotAgreed,     // Agreeing: some rank gave up before the ranks agreed on a first call
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
  std::unique_ptr<BufferBlock> block_;                 // from Agreeing on
  std::uint64_t calls_ = 0;                            // hooked calls routed so far
  std::unique_ptr<CallSwitch> agreement_;              // while Agreeing; it reads the block's boards
  std::uint64_t firstTaken_ = 0;                       // Ready: the first call our kernels may take
  Verdict verdict_;                                    // for the eligible line, once agreed
  std::mutex engineMutex_;  // only ever held for a pointer swap or one flag store
  std::unique_ptr<RankEngine> engine_;  // from the handshake's allocation on
};

// The state under its lock: the only way to change its phase or to use its engine.
class CommState::Locked {
 public:
  explicit Locked(CommState& state) : state_(state), lock_(state.mutex_) {}

  CommPhase phase() const { return state_.phase(); }
  const std::string& reason() const { return state_.reason_; }

  // Pending -> SettingUp: the caller's set-up takes it. False when it is not Pending
  // (set up, being set up, or released meanwhile).
  bool beginSetUp();
  // The engine the set-up made for it, before the set-up concludes. From here on an
  // abort reaches it (requestStop), set up or not.
  void installEngine(std::unique_ptr<RankEngine> engine);
  // SettingUp -> Agreeing, with the engine attached to `block` and its peers', and this rank
  // joined to the agreement on the first call taken (as of the calls routed so far), which it
  // follows at once. False (and the block retired) when that cannot be: not SettingUp, or no
  // engine.
  bool beginAgreeing(std::unique_ptr<BufferBlock> block, const Verdict& verdict, std::unique_ptr<CallSwitch> agreement);
  // Agreeing: what the agreement says now (the set-up worker asks between calls), or, with
  // `giveUp`, that this rank will take nothing (unless the ranks already agreed). No-op in any
  // other phase.
  void followAgreement(bool giveUp, const std::string& whyGiveUp = {});
  // Whether this rank still waits for the ranks to agree (the set-up worker's question).
  bool agreeing() const { return phase() == CommPhase::Agreeing; }
  // -> Ineligible from the phase `cause` belongs to; false, with nothing changed, from any
  // other (NoSetUp: the communicator was released or set up meanwhile).
  bool becomeIneligible(IneligibleCause cause, const std::string& reason);
  // -> Released. Returns the phase it left; nothing when it was released already.
  std::optional<CommPhase> release();

  // A hooked call, in the order the program makes them on this communicator (each one counts
  // once): whether it may go to the engine (Ready, at or after the agreed first call, no stop
  // asked). While Agreeing it first raises this rank's part in the agreement. When not, it is
  // counted as forwarded, and *reason (if given) says why: not ready before the first call
  // taken, not eligible after; once released, not at all (*reason untouched).
  bool takesCall(std::optional<ForwardReason>* reason = nullptr);
  // A call takesCall admitted, kept for its group's end: whether it still may go to the engine.
  bool takesDeferredCall();
  RankEngine* engine() const { return state_.engine_.get(); }
  std::unique_ptr<RankEngine> takeEngine();
  // The block, and with it the agreement's view of the boards, which it holds. An agreement
  // still open is given up first, so that the peers stop waiting for this rank.
  std::unique_ptr<BufferBlock> takeBlock();

 private:
  void follow(const CallSwitch::Outcome& outcome);

  CommState& state_;
  std::unique_lock<std::mutex> lock_;
};

inline CommState::Locked CommState::lock() { return Locked(*this); }

// "comm 0x... rank 1/4", the prefix of every log line about a communicator.
std::string describe(const CommState& state);

}  // namespace car
