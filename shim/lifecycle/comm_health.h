// Before our kernel takes a call: is the communicator still whole in NCCL's eyes? One that
// NCCL found broken (an asynchronous error, a failed peer) gets the call forwarded, so the
// caller sees NCCL's error instead of our kernel waiting for a peer that will not come.
// ncclInProgress is a nonblocking communicator still busy with an earlier call: healthy.
// The per-call price is one ncclCommGetAsyncError, which in NCCL 2.28 checks the handle and
// reads two atomic words: tens of nanoseconds against NCCL's few microseconds per call.
#pragma once

#include <nccl.h>

namespace car {

inline bool ncclAllowsOurKernel(ncclResult_t query, ncclResult_t async) {
  return query == ncclSuccess && (async == ncclSuccess || async == ncclInProgress);
}

}  // namespace car
