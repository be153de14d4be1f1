#include "lifecycle/release.h"

#include <chrono>

#include "lifecycle/let_go.h"
#include "lifecycle/registry.h"
#include "log.h"

namespace car {
namespace {

const char* callName(ReleaseKind kind) {
  switch (kind) {
    case ReleaseKind::Destroy: return "ncclCommDestroy";
    case ReleaseKind::Finalize: return "ncclCommFinalize";
    case ReleaseKind::Abort: return "ncclCommAbort";
    case ReleaseKind::Suspend: return "ncclCommSuspend";
  }
  return "release";
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Waits up to `seconds` for the launcher's last launch, raising its abort word as soon as a
// stop is asked for (an abort from another thread: the launcher is out of the communicator
// by now, so requestStop could not reach it).
bool waitForKernels(Communicator& state, Launcher& engine, double seconds, bool* raised) {
  const double deadline = now() + seconds;
  while (!engine.waitIdleWithin(0.01)) {
    if (state.stopRequested() && !*raised) {
      engine.raiseAbort();
      *raised = true;
      CAR_INFO(state.device(), "{}: our kernels told to stop (an abort came while we waited)", describe(state));
    }
    if (now() > deadline) return false;
  }
  return true;
}

// Our last kernel ended (true), or is still running after every bound (false).
bool drain(Communicator& state, Launcher& engine, ReleaseKind kind) {
  bool raised = false;
  if (state.stopRequested()) {
    engine.raiseAbort();  // raised already by requestStop; idempotent
    raised = true;
  }
  const double first = raised ? kAbortDrainSeconds : kReleaseDrainSeconds;
  if (waitForKernels(state, engine, first, &raised)) return true;
  if (raised) return false;
  CAR_WARN(state.device(), "{}: our last kernel did not finish within {} s of {} (a peer never joined that "
           "all-reduce); telling it to stop, its result is undefined", describe(state), first, callName(kind));
  engine.raiseAbort();
  raised = true;
  return waitForKernels(state, engine, kAbortDrainSeconds, &raised);
}

void releaseOurSide(Communicator& comm, ReleaseKind kind) {
  Holdings held;
  std::optional<CommPhase> before;
  {
    Communicator::Locked locked = comm.lock();
    before = locked.release(&held);
  }
  // Released already, or never set up. A set-up still running lets go of its own block when
  // it sees the release; a launcher it installed is here, none of its kernels ever ran.
  if (!before || *before == CommPhase::Pending) return;
  if (held.launcher && !drain(comm, *held.launcher, kind)) {
    // A kernel of ours may still run: its memory and the peers' blocks it reads must stay
    // (Holdings keeps what it is not told to dispose of).
    CAR_WARN(comm.device(), "{}: our last kernel did not finish within {} s of being told to stop; its buffers "
             "and mappings are left allocated", describe(comm), kAbortDrainSeconds);
    return;
  }
  // A replay of a captured call may outlive the drain: such a block is freed, not handed to
  // the next communicator.
  if (held.launcher && held.block && held.launcher->everCaptured()) held.block->forgoReuse();
  dispose(std::move(held), describe(comm), ImporterWait::Bounded);
  if (*before == CommPhase::SettingUp) return;
  CAR_INFO(comm.device(), "{}", logText(formatReleased, describe(comm).c_str(), comm.counters().summary().c_str()));
}

void releaseAndForget(const std::shared_ptr<Communicator>& state, ReleaseKind kind) {
  releaseOurSide(*state, kind);
  Registry::instance().forget(state);
}

}  // namespace

bool releaseBeforeNccl(ncclComm_t comm, ReleaseKind kind) {
  const std::shared_ptr<Communicator> state = Registry::instance().find(comm);
  if (!state) return true;
  if (!state->gate().close(kGateCloseSeconds)) {
    CAR_INFO(state->device(), "{} {}: a set-up call of ours is still inside NCCL", describe(*state), callName(kind));
  }
  // Another thread releases it: an abort (which took NCCL's call too) or the caller's own
  // second release, which reaches NCCL from that thread.
  if (!state->claimRelease()) return false;
  releaseAndForget(state, kind);
  return !state->abortReachedNccl();
}

std::shared_ptr<Communicator> beginAbort(ncclComm_t comm) {
  std::shared_ptr<Communicator> state = Registry::instance().find(comm);
  if (!state) return nullptr;
  // First our spinning kernels, then our set-up calls: NCCL frees the communicator next.
  if (state->requestStop()) CAR_INFO(state->device(), "{} ncclCommAbort: our kernels told to stop", describe(*state));
  if (!state->gate().close(kGateCloseSeconds)) {
    CAR_INFO(state->device(), "{} ncclCommAbort: a set-up call of ours is still inside NCCL; NCCL's abort ends it",
             describe(*state));
  }
  state->noteAbortReachedNccl();
  return state;
}

void finishAbort(const std::shared_ptr<Communicator>& state) {
  if (!state->claimRelease()) return;  // a destroy or finalize there ends its wait now
  releaseAndForget(state, ReleaseKind::Abort);
}

void releaseForSuspend(ncclComm_t comm) {
  const std::shared_ptr<Communicator> state = Registry::instance().find(comm);
  if (!state) return;
  if (!state->gate().close(kGateCloseSeconds)) {
    CAR_INFO(state->device(), "{} ncclCommSuspend: a set-up call of ours is still inside NCCL", describe(*state));
  }
  if (!state->claimRelease()) return;
  // Set up again at resume, it would need every rank to resume at the same point of the
  // program, which NCCL does not ask for: the communicator stays NCCL's alone.
  CAR_WARN(state->device(), "{}: ncclCommSuspend: our buffers are released with NCCL's; its all-reduces go to NCCL "
           "from now on, also after ncclCommResume", describe(*state));
  releaseAndForget(state, ReleaseKind::Suspend);
}

void releaseDisplaced(const std::shared_ptr<Communicator>& stale) {
  // An abort reached NCCL through our hook and freed it; that abort releases our side as it
  // returns (finishAbort), and NCCL handed the address out meanwhile.
  if (stale->abortReachedNccl()) return;
  CAR_WARN(stale->device(), "{}: NCCL gave this communicator's address to a new one, so it freed the old one "
           "without ncclCommDestroy, ncclCommFinalize or ncclCommAbort passing through the library (pncclCommDestroy, "
           "or a handle to the real NCCL?); our side of the old one is released now", describe(*stale));
  // NCCL freed it: nothing of it runs any more, so ours are told to stop at once, as at an abort.
  stale->requestStop();
  stale->gate().close(kGateCloseSeconds);
  if (stale->claimRelease()) releaseOurSide(*stale, ReleaseKind::Abort);
}

void stopBeforeNccl(ncclComm_t comm, const char* call) {
  const std::shared_ptr<Communicator> state = Registry::instance().find(comm);
  if (!state) return;
  if (state->requestStop()) {
    CAR_INFO(state->device(), "{} {}: our kernels told to stop; its all-reduces go to NCCL from now on",
             describe(*state), call);
  }
}

}  // namespace car
