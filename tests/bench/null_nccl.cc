// A libnccl.so.2 that does nothing, as fast as it can: one rank per communicator, every call
// ncclSuccess. Behind libnccl-car.so it leaves only the library's own cost to time
// (tests/bench/hook_cost_bench.cc). The functions the library requires of a real NCCL
// (shim/exports/real_nccl.cc), and the ones the bench calls.
#include <nccl.h>

#include <cstdint>

#define NULL_NCCL extern "C" __attribute__((visibility("default")))

namespace {
struct NullComm {
  int device = 0;
};
}  // namespace

NULL_NCCL ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
NULL_NCCL const char* ncclGetErrorString(ncclResult_t) { return "null NCCL"; }
NULL_NCCL ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  *id = ncclUniqueId{};
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclCommInitRank(ncclComm_t* comm, int, ncclUniqueId, int) {
  *comm = reinterpret_cast<ncclComm_t>(new NullComm());
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclCommInitAll(ncclComm_t* comms, int count, const int*) {
  for (int i = 0; i < count; ++i) comms[i] = reinterpret_cast<ncclComm_t>(new NullComm());
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete reinterpret_cast<NullComm*>(comm);
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
NULL_NCCL ncclResult_t ncclCommCount(const ncclComm_t, int* count) {
  *count = 1;
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclCommUserRank(const ncclComm_t, int* rank) {
  *rank = 0;
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  *device = reinterpret_cast<const NullComm*>(comm)->device;
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* async) {
  *async = ncclSuccess;
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclGroupStart() { return ncclSuccess; }
NULL_NCCL ncclResult_t ncclGroupEnd() { return ncclSuccess; }
NULL_NCCL ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                     cudaStream_t) {
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
NULL_NCCL ncclResult_t ncclReduceScatter(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                         cudaStream_t) {
  return ncclSuccess;
}
