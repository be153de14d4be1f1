// One exported forwarder for every function of nccl.h (nccl_api.def), so that
// libnccl-car.so can also serve as libnccl.so.2 to programs that load NCCL themselves and
// look functions up on that handle (dlopen + dlsym). Each passes its arguments, untouched,
// to the same function of the real NCCL and returns what it returned.
//
// The forwarders are weak: hooks.cc defines the functions we interpose, and its (strong)
// definitions replace these when libnccl-car.so is linked. A new hook needs no change here.
#include <nccl.h>

#include "exports/forward_target.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit: forwarded all the same

#define CAR_NCCL_FUNCTION(ret, name, params, args)                             \
  extern "C" __attribute__((weak, visibility("default"))) ret name params {    \
    static car::ForwardEntry entry;                                            \
    bool noRealNccl = false;                                                   \
    void* target = car::forwardTarget(#name, entry, &noRealNccl);              \
    if (target == nullptr) return car::unavailableResult<ret>(noRealNccl);     \
    return reinterpret_cast<decltype(&::name)>(target) args;                   \
  }
#include "exports/nccl_api.def"
#undef CAR_NCCL_FUNCTION

// NCCL's profiling names (pnccl*), for profilers that define nccl* and reach NCCL through
// these (MPI's PMPI pattern): plain forwarders to the real NCCL's own pnccl*, never our hooks.
// A profiler loaded behind us then gets our hooks' calls and passes them on to NCCL, not back
// to us; and a program linked against them starts under LD_AUDIT and the drop-in folder too.
#define CAR_NCCL_FUNCTION(ret, name, params, args)                             \
  extern "C" __attribute__((weak, visibility("default"))) ret p##name params { \
    static car::ForwardEntry entry;                                            \
    bool noRealNccl = false;                                                   \
    void* target = car::forwardTarget("p" #name, entry, &noRealNccl);          \
    if (target == nullptr) return car::unavailableResult<ret>(noRealNccl);     \
    return reinterpret_cast<decltype(&::name)>(target) args;                   \
  }
#include "exports/nccl_api.def"
#undef CAR_NCCL_FUNCTION
