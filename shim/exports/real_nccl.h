// The real NCCL, resolved at run time into one table of function pointers: the ones our hooks
// call. We never link libnccl: the program's own copy is found as the next library (dlsym
// RTLD_NEXT; behind the front too, front_names.h), or under the front's private name, or as
// an already-loaded libnccl.so.2 (PyTorch loads its copy privately), or by dlopen of
// NCCL_CAR_NCCL_LIB / libnccl.so.2.
#pragma once

#include <nccl.h>

namespace car {

struct RealNccl {
  decltype(&::ncclAllReduce) allReduce;
  decltype(&::ncclAllGather) allGather;
  decltype(&::ncclReduceScatter) reduceScatter;
  decltype(&::ncclCommInitRank) commInitRank;
  decltype(&::ncclCommInitRankConfig) commInitRankConfig;  // may be null (before NCCL 2.14)
  decltype(&::ncclCommInitRankScalable) commInitRankScalable;  // may be null (before NCCL 2.23)
  decltype(&::ncclCommInitAll) commInitAll;
  decltype(&::ncclCommSplit) commSplit;  // may be null (before NCCL 2.18)
  decltype(&::ncclCommShrink) commShrink;  // may be null (before NCCL 2.27)
  decltype(&::ncclCommRevoke) commRevoke;  // may be null (before NCCL 2.28.7)
  decltype(&::ncclCommDestroy) commDestroy;
  decltype(&::ncclCommAbort) commAbort;
  decltype(&::ncclCommFinalize) commFinalize;  // may be null (before NCCL 2.14)
  decltype(&::ncclGroupStart) groupStart;
  decltype(&::ncclGroupEnd) groupEnd;
  decltype(&::ncclGroupSimulateEnd) groupSimulateEnd;  // may be null (before NCCL 2.22)
  decltype(&::ncclCommWindowRegister) commWindowRegister;      // may be null (before NCCL 2.27)
  decltype(&::ncclCommWindowDeregister) commWindowDeregister;  // may be null (before NCCL 2.27)
  decltype(&::ncclCommGetAsyncError) commGetAsyncError;
  decltype(&::ncclCommCount) commCount;
  decltype(&::ncclCommUserRank) commUserRank;
  decltype(&::ncclCommCuDevice) commCuDevice;
  decltype(&::ncclGetErrorString) getErrorString;
  decltype(&::ncclGetVersion) getVersion;
  // Functions of newer NCCLs that hooks.cc hooks, each under the same guard.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  decltype(&::ncclCommGrow) commGrow;  // may be null (before NCCL 2.29)
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 7)
  decltype(&::ncclCommSuspend) commSuspend;  // may be null (before NCCL 2.29.7)
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
  decltype(&::ncclAllReduceConfig) allReduceConfig;  // may be null (before NCCL 2.32)
  decltype(&::ncclAllGatherConfig) allGatherConfig;  // may be null (before NCCL 2.32)
  decltype(&::ncclReduceScatterConfig) reduceScatterConfig;  // may be null (before NCCL 2.32)
#endif
  const char* origin;  // how it was found and its file, for the log
};

// The table, or nullptr when no real NCCL can be found (logged once, naming
// NCCL_CAR_NCCL_LIB). Resolved at the first call, retried until it succeeds: NCCL may be
// loaded after us.
const RealNccl* realNccl();

// One WARN per function, the first time a caller asks for `name` and the real NCCL lacks it
// (an older NCCL): the hooks of such functions then return ncclInvalidUsage.
void reportMissing(const RealNccl& real, const char* name);

// `name` in `handle`, or nullptr when it is missing or resolves back to our own library (a
// preload loaded twice, or a handle of the front, where our hooks come first).
void* realSymbol(void* handle, const char* name);

// What a hook returns when realNccl() is null.
constexpr ncclResult_t kNoRealNccl = ncclSystemError;

}  // namespace car
