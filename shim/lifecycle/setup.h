// When and how a communicator gets its IPC buffers (docs/design.md, "When set-up happens").
//  - blocking init outside a group: right after the real call returns;
//  - init inside ncclGroupStart/End: at the outer ncclGroupEnd, all of the thread's new
//    communicators together, their handshakes in one group (a blocking handshake per
//    communicator would deadlock nccl-tests, which creates them all from one thread);
//  - nonblocking communicators: never inside the creating call, but before the first
//    all-reduce issued outside a group (or at the end of the first group that holds one),
//    once the real communicator has finished initialising. Every rank meets that point
//    at the same call, so every rank runs the handshake at the same time.
#pragma once

#include <nccl.h>

#include <memory>
#include <vector>

#include "lifecycle/comm_state.h"
#include "exports/real_nccl.h"

namespace car {

// A communicator fresh from a real init/split call that succeeded (or is in progress).
std::shared_ptr<CommState> adoptCommunicator(ncclComm_t comm, bool nonblocking);

// A blocking split or shrink inside a group: NCCL writes the new communicator into *newcomm
// only when the group has run (until then it holds NULL). Adopted at the thread's outermost
// group end, when that end succeeded, and set up with the group's other new communicators;
// `newcomm` must stay valid until then, as NCCL itself requires.
void adoptAtGroupEnd(ncclComm_t* newcomm);

// Sets the adopted communicators up now, or marks them for later, per the rules above.
void scheduleSetup(const RealNccl& real, const std::vector<std::shared_ptr<CommState>>& states);

// Group bookkeeping of the calling thread (NCCL groups are per thread).
void noteGroupStart();
void noteGroupStartFailed();
void noteGroupEnd(const RealNccl& real, ncclResult_t realResult);
// ncclGroupSimulateEnd ends a group too (NCCL counts it as an end), but runs nothing of it.
void noteGroupSimulateEnd();
bool insideGroup();

// Called by the all-reduce hook for a Pending communicator: sets a nonblocking one up when
// the rules allow it now, or remembers that its first group has an all-reduce.
void setUpBeforeAllReduce(const RealNccl& real, const std::shared_ptr<CommState>& state);

}  // namespace car
