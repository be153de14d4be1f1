// Our side of one real communicator (one rank of it, in this process): who it is, where it is
// in its life, what it holds, and the one decision every hooked collective on it goes
// through. Every change of phase goes through one method here, which checks that the change
// is allowed and logs it.
//
//   Pending ──beginSetUp──> SettingUp ──beginAgreeing──> Agreeing ──(agreed)──> Ready
//      ^                        │                            │                   │
//      └─ exchange refused ─────┤                            │                   │
//   Pending, SettingUp, Agreeing, Ready ──becomeIneligible──> Ineligible
//   every phase but Released ──release──> Released
//
// Locking, all of it. One lock (a Locked view) covers the phase, the reason, the call index,
// the agreement, the block and the launcher. A hooked collective
// takes it once, to decide and, for a call that is ours, to launch. The set-up takes it only
// to change the phase or to hand over what it made; nothing holds it across a wait for a
// peer, a retirement or a call of NCCL. Without it: the identity (written before the set-up
// shares the object), the counters (atomics), the gate, the release flags, the plan's basis
// (published once, before Agreeing, never changed), and the abort word (behind a small lock
// of its own: a stop must never wait behind a launch).
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
#include "launcher.h"
#include "lifecycle/call_gate.h"
#include "lifecycle/symmetric_windows.h"
#include "stats.h"

namespace car {

enum class CommPhase {
  Pending,     // adopted; waits for its set-up point (shim/lifecycle/setup.h)
  SettingUp,   // a set-up has it (shim/handshake/handshake.h)
  Agreeing,    // set up and eligible; the ranks agree on the first call our kernels take (setup_board.h)
  Ready,       // agreed: from that call on, the calls the plan gives us run on our kernels
  Ineligible,  // every call is forwarded (reason() says why)
  Released,    // destroyed, aborted, finalized or suspended
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

// Whether NCCL's answer about a communicator (ncclCommGetAsyncError: its own result and the
// asynchronous error) lets our kernel take a call: a communicator NCCL found broken gets the
// call forwarded, so the caller sees NCCL's error instead of our kernel waiting for a peer
// that will not come. ncclInProgress is a nonblocking one still busy with an earlier call.
inline bool ncclAllowsOurKernel(ncclResult_t query, ncclResult_t async) {
  return query == ncclSuccess && (async == ncclSuccess || async == ncclInProgress);
}

// What the set-up made and a communicator let go of: disposed of outside the lock, by
// whoever may make CUDA calls there (lifecycle/let_go.h). Holdings dropped without that are
// kept for good, never freed under a kernel or a peer that may still use them.
struct Holdings {
  std::unique_ptr<Launcher> launcher;
  std::unique_ptr<BufferBlock> block;

  Holdings() = default;
  Holdings(Holdings&&) = default;
  Holdings& operator=(Holdings&&) = default;
  ~Holdings() {
    BufferBlock::abandon(std::move(block));
    static_cast<void>(launcher.release());
  }
  explicit operator bool() const { return launcher || block; }
};

// What the plan (plugin/policy.h) reads about a communicator: fixed when it starts agreeing
// and never changed after, so a call's plan can be made outside the lock.
struct PlanBasis {
  CommunicatorFacts facts;
  Config config;  // the launcher's
};

// A hooked collective as decide() sees it: the call, and what this rank read just before,
// outside the lock.
struct CallContext {
  bool insideGroup = false;  // between ncclGroupStart and its outermost ncclGroupEnd
  // The call's plan, where the communicator's basis was known: decide() uses it rather than
  // planning again. A call it forwards asks NCCL nothing (the two fields below stay unread).
  std::optional<CallPlan> plan;
  // NCCL's answer about the communicator (ncclCommGetAsyncError), asked only where the call
  // may be ours; empty when not asked or healthy, else NCCL's error text.
  std::string ncclBroken;
  // NCCL_CHECK_POINTERS: a buffer NCCL would refuse (NCCL answers, not our kernel).
  bool pointersRefused = false;
};

// What decide() made of one call.
struct Decision {
  enum class Route {
    Ours,      // our kernel is on the stream
    Deferred,  // ours, kept for the group's end (lifecycle/group_calls.h) with its plan
    Nccl,      // forwarded (and counted) for `reason`
    Released,  // the communicator is released: forwarded, not counted
  };
  Route route = Route::Nccl;
  ForwardReason reason = ForwardReason::NotReady;
  CallPlan plan;            // Ours, Deferred
  bool placed = false;      // the call took a place in the communicator's sequence of calls:
  std::uint64_t index = 0;  // this one
};

class Communicator {
 public:
  Communicator(ncclComm_t comm, bool nonblocking) : comm_(comm), nonblocking_(nonblocking) {}
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();

  ncclComm_t comm() const { return comm_; }
  // Its calls return before NCCL finished them (NCCL_COMM_BLOCKING=0 or the config's blocking = 0).
  bool nonblocking() const { return nonblocking_; }
  // What NCCL told the set-up; ranks() is 0 until then.
  int rank() const { return rank_.load(std::memory_order_relaxed); }
  int ranks() const { return ranks_.load(std::memory_order_acquire); }
  int device() const { return device_.load(std::memory_order_relaxed); }
  void learnIdentity(int rank, int ranks, int device);

  // Our own NCCL calls on the communicator (the set-up's); closed by abort, destroy and finalize.
  CallGate& gate() { return gate_; }
  SymmetricWindows& symmetricWindows() { return symmetricWindows_; }
  // What its calls did: counted once each, here.
  CallStats& counters() { return counters_; }

  // The phase as last set. Without the lock only a hint, to be checked again under it.
  CommPhase phase() const { return phase_.load(std::memory_order_acquire); }
  // What a call's plan reads, from Agreeing on (nullptr before); without the lock: once
  // published it never changes and lives as long as the communicator.
  const PlanBasis* planBasis() const { return planBasis_.load(std::memory_order_acquire); }

  // A call NCCL accepted while a set-up waits for its exchange to be launched: NCCL launches a
  // nonblocking group from its own thread and refuses any later call until it has, so an
  // accepted call means our all-gather is on its stream. Counted from the program's thread;
  // the set-up worker reads it instead of asking NCCL itself.
  void noteNcclAccepted() { ncclAccepted_.fetch_add(1, std::memory_order_release); }
  std::uint64_t ncclAccepted() const { return ncclAccepted_.load(std::memory_order_acquire); }

  // ---- The release protocol (shim/lifecycle/release.h); none of these takes the lock.
  // ncclCommAbort, ncclCommRevoke or ncclCommShrink(NCCL_SHRINK_ABORT): our kernels are told
  // to stop, none starts after, and every later call goes to NCCL. Returns whether there was
  // a launcher to tell.
  bool requestStop();
  bool stopRequested() const { return stopRequested_.load(); }
  // True for the one caller that releases our side; every later one gets false.
  bool claimRelease() { return !releaseClaimed_.exchange(true); }
  // An abort has reached NCCL: no other call of ours may reach NCCL on this communicator.
  void noteAbortReachedNccl() { abortReachedNccl_.store(true); }
  bool abortReachedNccl() const { return abortReachedNccl_.load(); }
  // True the first time only: one WARN for calls refused while another thread releases.
  bool firstRefusal() { return !refusalWarned_.exchange(true); }
  // NCCL_CAR_DETERMINISTIC: bit r set once a call forwarded for ForwardReason r was WARNed.
  std::atomic<std::uint32_t>& invarianceWarned() { return invarianceWarned_; }

  class Locked;
  Locked lock();

  // The decision's first step, which needs none of the call's facts: a communicator that can
  // take no call any more (Ineligible, a phase it leaves only for its release) forwards it,
  // counted as ineligibleReason(), without the lock (it has no agreement left for which the
  // call's place in its sequence would matter). Returns whether it did.
  bool forwardedAsIneligible();
  // What every call of an Ineligible communicator is counted as (becomeIneligible sets it
  // before the phase, which publishes it): ineligible-comm unless its verdict said otherwise.
  ForwardReason ineligibleReason() const { return ineligibleReason_.load(std::memory_order_relaxed); }
  // A forwarded call NCCL refused (outside a group; a group's calls are given back at its
  // end): its count, and, where it took one, its place (Locked::giveBack). Counts are of the
  // calls NCCL took.
  void giveBack(const Decision& refused);
  // The one decision for a hooked collective: forwardedAsIneligible(), then, under the lock,
  // Locked::decide.
  Decision decide(const CollectiveCall& call, const CallContext& context, Holdings* letGo);

 private:
  bool moveTo(CommPhase to);  // under the lock
  void setLauncher(std::unique_ptr<Launcher> launcher);  // under the lock
  std::unique_ptr<Launcher> takeLauncher();               // under the lock

  // What every hooked call reads or writes, first: with the words of the lock that locking
  // touches (a glibc mutex's first 20 bytes), on the object's first 64-byte line; the counters
  // are a second. Between two calls the program's and NCCL's own work push these out of the
  // nearer caches, and each line the hook finds there costs a forwarded call time
  // (docs/benchmarks.md, "Cache lines").
  alignas(64) std::atomic<CommPhase> phase_{CommPhase::Pending};  // written under mutex_
  CallGate gate_;
  std::atomic<bool> stopRequested_{false};
  std::uint64_t calls_ = 0;                           // the index of the next hooked call
  std::uint64_t firstTaken_ = 0;                      // Ready: the first call our kernels may take
  std::atomic<const PlanBasis*> planBasis_{nullptr};  // planBasisOwned_, published
  std::mutex mutex_;                                  // the lock

  const ncclComm_t comm_;
  const bool nonblocking_;
  std::atomic<int> rank_{0};
  std::atomic<int> ranks_{0};
  std::atomic<int> device_{0};

  SymmetricWindows symmetricWindows_;
  CallStats counters_;
  std::atomic<std::uint64_t> ncclAccepted_{0};

  std::atomic<bool> releaseClaimed_{false};
  std::atomic<bool> abortReachedNccl_{false};
  std::atomic<bool> refusalWarned_{false};
  std::atomic<std::uint32_t> invarianceWarned_{0};

  std::string reason_;  // why Ineligible
  // What its calls are counted as once Ineligible: written under mutex_ before phase_, read
  // after phase_ by forwardedAsIneligible() without the lock.
  std::atomic<ForwardReason> ineligibleReason_{ForwardReason::NotEligible};
  std::unique_ptr<CallSwitch> agreement_;            // while Agreeing; it reads the block's boards
  Verdict verdict_;                                  // the set-up's, for the eligible line
  std::unique_ptr<const PlanBasis> planBasisOwned_;  // set once, at beginAgreeing
  std::unique_ptr<BufferBlock> block_;               // from Agreeing on
  std::unique_ptr<Launcher> launcher_;               // from the set-up's allocation on

  std::mutex abortMutex_;  // only ever held for a pointer swap or one store
  Launcher* stoppable_ = nullptr;  // launcher_, for requestStop
};

// The communicator under its lock: the only way to change its phase, to decide a call or to
// use its launcher.
class Communicator::Locked {
 public:
  explicit Locked(Communicator& comm) : comm_(comm), lock_(comm.mutex_) {}

  CommPhase phase() const { return comm_.phase(); }
  const std::string& reason() const { return comm_.reason_; }

  // ---- The call path (shim/exports/hooks.cc), on the program's thread.
  // The one decision for a hooked collective, in one fixed order: released; the phase (not
  // ready before the agreed first call, not eligible after a verdict, a stop or a failure);
  // the plan (policy.h: op, type, size, the table, the call's config); NCCL's own answer
  // (broken, pointers), which only a call the plan makes ours needs; a nonblocking
  // communicator's group. Counts a forwarded call once.
  // Outside a group a call that is ours is launched here, and counted taken (or, should the
  // launch fail before the kernel is queued, forwarded as failed, and from then on every call).
  // *letGo gets what a communicator that never ran a kernel of ours let go of (the agreement
  // said never).
  Decision decide(const CollectiveCall& call, const CallContext& context, Holdings* letGo);
  // A call decide() deferred to its group's end, which has run: launched now, unless the
  // communicator was released or stopped meanwhile (then Nccl with the reason, or Released).
  Decision launchDeferred(const CollectiveCall& call, const CallPlan& plan);
  // NCCL refused a forwarded call (or the group it was in): it never entered the
  // communicator's sequence, so it gives back its place, for the next call to take, and its
  // count. Only the latest places can be given back.
  void giveBack(const Decision& refused);
  // The index the next hooked call gets.
  std::uint64_t nextIndex() const { return comm_.calls_; }

  // ---- The set-up (shim/handshake/handshake.h, shim/lifecycle/setup.h).
  // Pending -> SettingUp: the caller's set-up takes it. False when it is not Pending.
  bool beginSetUp();
  // SettingUp -> Pending: NCCL refused the exchange, so it never entered NCCL's sequence on
  // this rank; the next set-up point issues it again.
  void exchangeRefused();
  // The launcher the set-up made, before it concludes: from here on an abort reaches it.
  // Only while SettingUp: one released meanwhile (its release took nothing) gets it back,
  // for the set-up to let go of (none of its kernels ever ran).
  [[nodiscard]] std::unique_ptr<Launcher> installLauncher(std::unique_ptr<Launcher> launcher);
  // SettingUp -> Agreeing, with the launcher attached to the block and its peers', and this
  // rank joined to the agreement on the first call taken (as of the calls so far), which it
  // follows at once. False when that cannot be (not SettingUp, or no launcher): the caller
  // keeps the block; *letGo gets the launcher.
  bool beginAgreeing(std::unique_ptr<BufferBlock>* block, const std::vector<void*>& bases, const Verdict& verdict,
                     std::unique_ptr<CallSwitch> agreement, Holdings* letGo);
  // Agreeing: what the agreement says now, or, with `giveUp`, that this rank will take nothing
  // (unless the ranks already agreed). Never agreed: Ineligible, and *letGo gets everything
  // (none of our kernels ever ran on it). No-op in any other phase.
  void followAgreement(bool giveUp, const std::string& whyGiveUp, Holdings* letGo);
  // -> Ineligible from the phase `cause` belongs to; false, with nothing changed, from any
  // other phase. From SettingUp and Agreeing, where no kernel of ours ever ran, *letGo gets
  // everything it held; from Ready it keeps it until its release, which first waits for our
  // last kernel. Its calls are counted forwarded for `countedAs` from then on: ineligible-comm,
  // or what the verdict names (Verdict::forwardAs: untuned for the PCIe case nothing measured).
  bool becomeIneligible(IneligibleCause cause, const std::string& reason, Holdings* letGo,
                        ForwardReason countedAs = ForwardReason::NotEligible);

  // ---- The release (shim/lifecycle/release.h).
  // -> Released, with everything it held. Returns the phase it left; nothing when it was
  // released already.
  std::optional<CommPhase> release(Holdings* held);

 private:
  void follow(const CallSwitch::Outcome& outcome, const std::string& whyNever, Holdings* letGo);
  void letGoOfEverything(Holdings* letGo);
  // Counts the call forwarded for `reason`.
  Decision forward(Decision decision, ForwardReason reason);
  // Launches decision.plan and counts the call: taken, or forwarded as failed.
  Decision launch(Decision decision, const CollectiveCall& call);

  Communicator& comm_;
  std::unique_lock<std::mutex> lock_;
};

inline Communicator::Locked Communicator::lock() { return Locked(*this); }

inline bool Communicator::forwardedAsIneligible() {
  if (phase() != CommPhase::Ineligible) return false;
  counters_.countForwarded(ineligibleReason());
  return true;
}

inline void Communicator::giveBack(const Decision& refused) {
  if (refused.placed) {
    lock().giveBack(refused);
  } else if (refused.route == Decision::Route::Nccl) {
    counters_.uncountForwarded(refused.reason);
  }
}

inline Decision Communicator::decide(const CollectiveCall& call, const CallContext& context, Holdings* letGo) {
  Decision decision;
  if (forwardedAsIneligible()) {
    decision.reason = ineligibleReason();
    return decision;
  }
  return lock().decide(call, context, letGo);
}

// "comm 0x... rank 1/4", the prefix of every log line about a communicator.
std::string describe(const Communicator& comm);

}  // namespace car
