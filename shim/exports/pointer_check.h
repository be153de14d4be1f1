// NCCL_CHECK_POINTERS=1 (NCCL 2.29 and newer: NCCL_CHECK_MODE=DEBUG_LOCAL or DEBUG_GLOBAL)
// makes NCCL check a collective's buffers before anything runs: memory CUDA knows, and on
// the communicator's GPU when it is device memory; other buffers get ncclInvalidArgument.
// A call whose buffers fail the same check is left to NCCL, so the caller gets NCCL's
// answer, not a fault in our kernel. Off (NCCL's default), nothing is looked up.
#pragma once

namespace car {

// Whether NCCL checks buffers, read once (after NCCL's own start-up, which puts nccl.conf's
// values into the environment).
bool ncclChecksPointers();

// NCCL's test of one buffer for a communicator on `device`.
bool passesNcclPointerCheck(const void* pointer, int device);

}  // namespace car
