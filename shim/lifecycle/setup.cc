#include "lifecycle/setup.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>
#include <thread>

#include "handshake/handshake.h"
#include "log.h"
#include "lifecycle/registry.h"
#include "lifecycle/release.h"

namespace car {
namespace {

thread_local int tGroupDepth = 0;
thread_local std::vector<std::shared_ptr<CommState>> tCreatedInGroup;
// Nonblocking communicators, still Pending, that met an all-reduce in the group.
thread_local std::vector<std::shared_ptr<CommState>> tAllReduceInGroup;

// The caller's newcomm of each blocking split or shrink in the group (adoptAtGroupEnd).
thread_local std::vector<ncclComm_t*> tNewcommsInGroup;

// Hands every state still Pending to one batch of handshakes (which makes them SettingUp).
void setUpNow(const RealNccl& real, const std::vector<std::shared_ptr<CommState>>& states) {
  std::vector<std::shared_ptr<CommState>> claimed;
  for (const auto& state : states) {
    if (state->lock().beginSetUp()) claimed.push_back(state);
  }
  if (!claimed.empty()) runHandshakes(real, claimed);
}

// A communicator that never reached the handshake (unless it moved on meanwhile).
void markNotEligible(CommState& state, const std::string& reason) {
  state.lock().becomeIneligible(IneligibleCause::NoSetUp, reason);
}

// Nonblocking communicators: wait for the real init to finish, as the caller itself must
// before using it. Returns false (and marks it) if init failed or cannot be read, and
// false alone if an abort, destroy or finalize from another thread closed the gate.
bool waitUntilInitialised(const RealNccl& real, CommState& state) {
  ncclResult_t async = ncclInProgress;
  ncclResult_t query = ncclSuccess;
  while (true) {
    if (!state.gate().pass([&] { query = real.commGetAsyncError(state.comm(), &async); })) return false;
    if (query != ncclSuccess || async != ncclInProgress) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (query != ncclSuccess) {
    markNotEligible(state, std::string("cannot read the communicator's state: ") + real.getErrorString(query));
    return false;
  }
  if (async != ncclSuccess) {
    markNotEligible(state, std::string("the real communicator failed to initialise: ") + real.getErrorString(async));
    return false;
  }
  return true;
}

// What the thread's outermost group leaves to us when it ends (really or simulated).
struct EndedGroup {
  std::vector<std::shared_ptr<CommState>> created;  // communicators created in it
  std::vector<std::shared_ptr<CommState>> lazy;     // nonblocking ones that met an all-reduce in it
  std::vector<ncclComm_t*> newcomms;                // blocking splits and shrinks NCCL fills in only now
};

// The states of `states` that are this process's (lifecycle/registry.h: not inherited).
std::vector<std::shared_ptr<CommState>> ownOnly(std::vector<std::shared_ptr<CommState>> states) {
  states.erase(std::remove_if(states.begin(), states.end(),
                              [](const std::shared_ptr<CommState>& state) { return !Registry::instance().holds(state); }),
               states.end());
  return states;
}

// Counts a group end; at the outermost one hands over the group's communicators (this
// process's: a fork()ed child's inherited ones stay the parent's).
bool outermostGroupEnded(EndedGroup* group) {
  if (tGroupDepth > 0) --tGroupDepth;
  if (tGroupDepth > 0) return false;
  group->created = ownOnly(std::exchange(tCreatedInGroup, {}));
  group->lazy = ownOnly(std::exchange(tAllReduceInGroup, {}));
  group->newcomms.swap(tNewcommsInGroup);
  return true;
}

void setUpNonblocking(const RealNccl& real, const std::vector<std::shared_ptr<CommState>>& states) {
  std::vector<std::shared_ptr<CommState>> ready;
  for (const auto& state : states) {
    if (state->phase() == CommPhase::Pending && waitUntilInitialised(real, *state)) ready.push_back(state);
  }
  setUpNow(real, ready);
}

}  // namespace

std::shared_ptr<CommState> adoptCommunicator(ncclComm_t comm, bool nonblocking) {
  auto state = std::make_shared<CommState>(comm, nonblocking);
  if (std::shared_ptr<CommState> displaced = Registry::instance().add(state)) {
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

void scheduleSetup(const RealNccl& real, const std::vector<std::shared_ptr<CommState>>& states) {
  std::vector<std::shared_ptr<CommState>> blocking;
  for (const auto& state : states) {
    if (state->nonblocking()) continue;  // lazily, before its first all-reduce
    if (tGroupDepth > 0) tCreatedInGroup.push_back(state);
    else blocking.push_back(state);
  }
  setUpNow(real, blocking);
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
  setUpNow(real, group.created);
  setUpNonblocking(real, group.lazy);
}

void noteGroupSimulateEnd() {
  EndedGroup group;
  if (!outermostGroupEnded(&group)) return;
  // The lazy ones are set up at their next all-reduce outside a group, as if the group had
  // not been. Whether NCCL finished creating the others is not ours to guess: they forward.
  for (const auto& state : group.created) markNotEligible(*state, "created in a group ended by ncclGroupSimulateEnd");
}

void setUpBeforeAllReduce(const RealNccl& real, const std::shared_ptr<CommState>& state) {
  if (!state->nonblocking()) return;  // a blocking one is set up at its group's end
  if (tGroupDepth > 0) {
    if (std::find(tAllReduceInGroup.begin(), tAllReduceInGroup.end(), state) == tAllReduceInGroup.end()) {
      tAllReduceInGroup.push_back(state);
    }
    return;
  }
  setUpNonblocking(real, {state});
}

}  // namespace car
