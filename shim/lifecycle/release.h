// How our side of a communicator ends, around NCCL's own calls:
//  - ncclCommDestroy / ncclCommFinalize: wait for our last kernel (bounded: if it has not
//    finished after kReleaseDrainSeconds it is told to stop), close our mappings of the
//    peers' blocks, retire our own block (freed once no peer maps it), then NCCL's call;
//  - ncclCommAbort: our kernels told to stop and our set-up calls ended first, then NCCL's
//    abort, then the same release (bounded by kAbortDrainSeconds);
//  - ncclCommRevoke, ncclCommShrink(NCCL_SHRINK_ABORT): our kernels told to stop, later
//    all-reduces forwarded; the release comes with the communicator's destroy;
//  - ncclCommSuspend: released as a destroy is (NCCL_SUSPEND_MEM hands memory back, and a
//    suspended communicator runs nothing), before NCCL's call; the communicator is NCCL's
//    alone from then on, resumed or not.
// An abort from another thread while a destroy or finalize waits still finds the
// communicator (it stays registered until its release ends) and stops our kernels; the
// destroy or finalize then leaves NCCL alone, since NCCL freed the communicator in the abort.
// A release holds no lock of the communicator while it waits.
#pragma once

#include <nccl.h>

#include <memory>

#include "lifecycle/communicator.h"

namespace car {

enum class ReleaseKind { Destroy, Finalize, Abort, Suspend };

// After an abort NCCL's own kernels stop at once; ours stop at their next look at the
// abort word. Anything longer means our kernel is queued behind work that never ends.
constexpr double kAbortDrainSeconds = 10.0;
// Destroy and finalize let a kernel in flight complete, as NCCL's finalize does, but a
// peer that does not come within this long is taken for gone.
constexpr double kReleaseDrainSeconds = 30.0;

// ncclCommDestroy / ncclCommFinalize, before NCCL's call. Returns whether that call
// should still reach NCCL: false when another thread's abort or release of the same
// communicator has it.
bool releaseBeforeNccl(ncclComm_t comm, ReleaseKind kind);

// ncclCommAbort, before NCCL's abort: stops our kernels and our set-up calls.
std::shared_ptr<Communicator> beginAbort(ncclComm_t comm);
// ... and after it: releases our side (unless a destroy or finalize is already at it).
void finishAbort(const std::shared_ptr<Communicator>& state);

// ncclCommSuspend, before NCCL's call: our side released (its last kernel drained, its block
// retired) and forgotten, with a WARN that its all-reduces go to NCCL from now on.
void releaseForSuspend(ncclComm_t comm);

// ncclCommRevoke and ncclCommShrink(NCCL_SHRINK_ABORT), before NCCL's call.
void stopBeforeNccl(ncclComm_t comm, const char* call);

// A communicator NCCL freed unseen (its address came back from a new init,
// lifecycle/registry.h): released as an abort is (NCCL already freed it), with a WARN, and
// nothing sent to NCCL; unless an abort through our hook freed it, which releases it itself.
void releaseDisplaced(const std::shared_ptr<Communicator>& stale);

}  // namespace car
