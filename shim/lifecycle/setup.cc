#include "lifecycle/setup.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>
#include <thread>

#include "handshake/handshake.h"
#include "lifecycle/setup_worker.h"
#include "stream_calls.h"
#include "log.h"
#include "lifecycle/registry.h"
#include "lifecycle/release.h"

namespace car {
namespace {

thread_local int tGroupDepth = 0;
thread_local std::vector<std::shared_ptr<Communicator>> tCreatedInGroup;

// The caller's newcomm of each blocking split or shrink in the group (adoptAtGroupEnd).
thread_local std::vector<ncclComm_t*> tNewcommsInGroup;

// Every rank is in this creating call: the set-ups are started and waited for, bounded by
// NCCL_CAR_SETUP_TIMEOUT_MS; one that is not done by then gives up (on the worker).
void setUpAndWait(const RealNccl& real, const std::vector<std::shared_ptr<Communicator>>& comms) {
  std::vector<std::shared_ptr<Communicator>> claimed;
  for (const auto& comm : comms) {
    if (comm->lock().beginSetUp()) claimed.push_back(comm);
  }
  if (claimed.empty()) return;
  const std::vector<std::shared_ptr<SetUp>> setUps = startSetUps(real, claimed);
  advanceInBackground(setUps);
  if (!setUps.empty()) waitUntilSettled(setUps, setUps.front()->deadline());
}

// The engine's own query (plugin/stream_calls.h); a stream that cannot say counts as not
// capturing (without a GPU the set-up then fails at once, and says so).
bool capturing(cudaStream_t stream) {
  bool capturing = false;
  if (streamIsCapturing(stream, &capturing) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return capturing;
}

// A communicator that never reached the set-up (unless it moved on meanwhile).
void markNotEligible(Communicator& comm, const std::string& reason) {
  comm.lock().becomeIneligible(IneligibleCause::NoSetUp, reason, nullptr);
}

// What the thread's outermost group leaves to us when it ends (really or simulated).
struct EndedGroup {
  std::vector<std::shared_ptr<Communicator>> created;  // communicators created in it
  std::vector<ncclComm_t*> newcomms;                // blocking splits and shrinks NCCL fills in only now
};

// The states of `states` that are this process's (lifecycle/registry.h: not inherited).
std::vector<std::shared_ptr<Communicator>> ownOnly(std::vector<std::shared_ptr<Communicator>> states) {
  states.erase(std::remove_if(states.begin(), states.end(),
                              [](const std::shared_ptr<Communicator>& comm) { return !Registry::instance().holds(comm); }),
               states.end());
  return states;
}

// Counts a group end; at the outermost one hands over the group's communicators (this
// process's: a fork()ed child's inherited ones stay the parent's).
bool outermostGroupEnded(EndedGroup* group) {
  if (tGroupDepth > 0) --tGroupDepth;
  if (tGroupDepth > 0) return false;
  group->created = ownOnly(std::exchange(tCreatedInGroup, {}));
  group->newcomms.swap(tNewcommsInGroup);
  return true;
}

}  // namespace

std::shared_ptr<Communicator> adoptCommunicator(ncclComm_t comm, bool nonblocking) {
  auto state = std::make_shared<Communicator>(comm, nonblocking);
  if (std::shared_ptr<Communicator> displaced = Registry::instance().add(state)) {
    // The new one is set up whatever happens to the old one: its peers wait for it.
    try {
      releaseDisplaced(displaced);
    } catch (const std::exception& error) {
      CAR_WARN(-1, "{}: releasing the communicator it displaced failed: {}", describe(*state), error.what());
    }
  }
  return state;
}

void adoptAtGroupEnd(ncclComm_t* newcomm) {
  if (newcomm != nullptr && tGroupDepth > 0) tNewcommsInGroup.push_back(newcomm);
}

void scheduleSetup(const RealNccl& real, const std::vector<std::shared_ptr<Communicator>>& states) {
  std::vector<std::shared_ptr<Communicator>> blocking;
  for (const auto& state : states) {
    if (state->nonblocking()) continue;  // at its first call (setUpWithCall)
    if (tGroupDepth > 0) tCreatedInGroup.push_back(state);
    else blocking.push_back(state);
  }
  setUpAndWait(real, blocking);
}

void noteGroupStart() { ++tGroupDepth; }

void noteGroupStartFailed() {
  if (tGroupDepth > 0) --tGroupDepth;
}

bool insideGroup() { return tGroupDepth > 0; }

void noteGroupEnd(const RealNccl& real, ncclResult_t realResult) {
  EndedGroup group;
  if (!outermostGroupEnded(&group)) return;
  if (realResult != ncclSuccess && realResult != ncclInProgress) {
    if (group.created.empty()) return;
    const std::string reason = std::string("the group that created it failed: ") + real.getErrorString(realResult);
    for (const auto& state : group.created) markNotEligible(*state, reason);
    return;
  }
  // A group still in progress has nonblocking members: whether NCCL has written a child yet
  // would differ from rank to rank, so none is read (as for a nonblocking split, hooks.cc).
  if (realResult == ncclSuccess) {
    for (ncclComm_t* newcomm : group.newcomms) {
      // NCCL publishes the child with a release store; NULL: no communicator for this rank.
      const ncclComm_t child = __atomic_load_n(newcomm, __ATOMIC_ACQUIRE);
      if (child != nullptr) group.created.push_back(adoptCommunicator(child, false));
    }
  } else if (!group.newcomms.empty()) {
    CAR_INFO(-1, "{} ncclCommSplit/ncclCommShrink child(ren) of a group that ended in progress are not ours: their "
                 "all-reduces go to NCCL (not counted)", group.newcomms.size());
  }
  setUpAndWait(real, group.created);
}

void noteGroupSimulateEnd() {
  EndedGroup group;
  if (!outermostGroupEnded(&group)) return;
  // Whether NCCL finished creating them is not ours to guess: they forward.
  for (const auto& state : group.created) markNotEligible(*state, "created in a group ended by ncclGroupSimulateEnd");
}

bool setUpAtCall(const Communicator& comm, cudaStream_t stream) {
  // Never inside the caller's graph capture: the exchange's copies and collective would be
  // captured too, or break the capture. Never inside a group: NCCL runs a nonblocking
  // communicator's group calls later, from its own thread, and a group may end simulated or
  // failed. Every rank makes the same calls in the same groups and captures.
  return comm.phase() == CommPhase::Pending && tGroupDepth == 0 && !capturing(stream);
}

ncclResult_t setUpWithCall(const RealNccl& real, const std::shared_ptr<Communicator>& comm,
                           const std::function<ncclResult_t()>& call) {
  // Our calls on the communicator pass its gate: an abort from another thread waits for them.
  CallGate& gate = comm->gate();
  if (!gate.enter()) return call();
  if (!comm->lock().beginSetUp()) {
    gate.leave();
    return call();
  }
  JoinedCall joined;
  joined.issue = call;
  joined.gateHeld = comm.get();
  advanceInBackground(startSetUps(real, {comm}, &joined));
  gate.leave();
  // Pending again (NCCL answered nothing for it, or refused our group) while NCCL took the
  // call: the call entered NCCL's sequence without our exchange, which could only follow
  // later on this rank. Never ours, then.
  if (comm->phase() == CommPhase::Pending && (joined.answer() == ncclSuccess || joined.answer() == ncclInProgress)) {
    markNotEligible(*comm, "NCCL took its first call but would not answer the set-up's queries");
  }
  return joined.answer();
}

}  // namespace car
