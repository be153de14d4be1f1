// When a communicator's set-up starts (docs/design.md, "When set-up happens"):
//  - blocking init outside a group: right after the real call returns, which then waits
//    for it, bounded (every rank is in that creating call);
//  - init inside ncclGroupStart/End: at the outer ncclGroupEnd, all of the thread's new
//    communicators together, their exchanges in one group (one exchange per communicator
//    would deadlock nccl-tests, which creates them all from one thread), waited for alike;
//  - nonblocking communicators: at their first hooked collective issued outside a group and
//    outside a graph capture, its exchange in one NCCL group with that call, and never
//    waited for: the calls go to NCCL until the ranks have agreed on the first one ours take.
// Every rank meets these points at the same call, so every rank issues the exchange at the
// same point of its sequence of calls on the communicator: the points follow from the calls
// alone, never from a timing-dependent look at NCCL's state. Should NCCL refuse the exchange's
// group (a nonblocking communicator still in progress: the program's own call is refused
// with it), nothing of it entered NCCL's sequence: the communicator is Pending again, the
// refused call gives its place back, and the next hooked collective outside a group and a
// capture is the set-up point, for a blocking communicator as well.
#pragma once

#include <nccl.h>

#include <functional>
#include <memory>
#include <vector>

#include "lifecycle/communicator.h"
#include "exports/real_nccl.h"

namespace car {

// A communicator fresh from a real init/split call that succeeded (or is in progress).
std::shared_ptr<Communicator> adoptCommunicator(ncclComm_t comm, bool nonblocking);

// A blocking split or shrink inside a group: NCCL writes the new communicator into *newcomm
// only when the group has run (until then it holds NULL). Adopted at the thread's outermost
// group end, when that end succeeded, and set up with the group's other new communicators;
// `newcomm` must stay valid until then, as NCCL itself requires.
void adoptAtGroupEnd(ncclComm_t* newcomm);

// Sets the adopted communicators up now, or marks them for later, per the rules above.
void scheduleSetup(const RealNccl& real, const std::vector<std::shared_ptr<Communicator>>& comms);

// Group bookkeeping of the calling thread (NCCL groups are per thread).
void noteGroupStart();
void noteGroupStartFailed();
void noteGroupEnd(const RealNccl& real, ncclResult_t realResult);
// ncclGroupSimulateEnd ends a group too (NCCL counts it as an end), but runs nothing of it.
void noteGroupSimulateEnd();
bool insideGroup();

// Whether a hooked collective on `comm`, on `stream`, is its set-up point: it is still Pending,
// and the call is outside a group and a graph capture.
bool setUpAtCall(const Communicator& comm, cudaStream_t stream);

// The set-up at a call: the exchange and `call` (the caller's own, forwarded: it is never
// ours) issued in one NCCL group, the rest left to the set-up worker. Our calls pass the
// communicator's gate. Returns what the call returns.
ncclResult_t setUpWithCall(const RealNccl& real, const std::shared_ptr<Communicator>& comm,
                           const std::function<ncclResult_t()>& call);

}  // namespace car
