// The real NCCL, resolved at run time into one table of function pointers. We never link
// libnccl: the program's own copy is found as the next library (dlsym RTLD_NEXT), or as an
// already-loaded libnccl.so.2 (PyTorch loads its copy privately), or by dlopen of
// NCCL_CAR_NCCL_LIB / libnccl.so.2.
#pragma once

#include <nccl.h>

namespace car {

struct RealNccl {
  decltype(&::ncclAllReduce) allReduce;
  decltype(&::ncclAllGather) allGather;
  decltype(&::ncclCommInitRank) commInitRank;
  decltype(&::ncclCommInitRankConfig) commInitRankConfig;
  decltype(&::ncclCommInitRankScalable) commInitRankScalable;  // may be null (older NCCL)
  decltype(&::ncclCommInitAll) commInitAll;
  decltype(&::ncclCommSplit) commSplit;
  decltype(&::ncclCommShrink) commShrink;  // may be null (older NCCL)
  ncclResult_t (*commRevoke)(ncclComm_t, int);  // may be null (before NCCL 2.28)
  decltype(&::ncclCommDestroy) commDestroy;
  decltype(&::ncclCommAbort) commAbort;
  decltype(&::ncclCommFinalize) commFinalize;
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
  const char* origin;  // how it was found, for the log
  void* handle;        // what it was found in (a dlopen handle or RTLD_NEXT), for forward_target.cc
};

// The table, or nullptr when no real NCCL can be found (logged once, naming
// NCCL_CAR_NCCL_LIB). Resolved at the first call, retried until it succeeds: NCCL may be
// loaded after us.
const RealNccl* realNccl();

// `name` in `handle`, or nullptr when it is missing or resolves back to our own library (a
// preload loaded twice, or our library found under the name libnccl.so.2).
void* realSymbol(void* handle, const char* name);

// What a hook returns when realNccl() is null.
constexpr ncclResult_t kNoRealNccl = ncclSystemError;

}  // namespace car
