// At process exit, one line per communicator still alive (never destroyed, as JAX leaves
// its own), with its counts: "<comm> alive at exit: taken ... forwarded ..." (log_format.h),
// which nccl-car run sums with the released: lines. Host counters only: no CUDA or NCCL call,
// nothing freed.
#pragma once

namespace car {

// Registers the exit handler, once. Called when the registry is made: the log exists by
// then, so the handler runs before the log's statics are destroyed.
void reportCountsAtExit();

}  // namespace car
