// Scenario "nonhooked": the NCCL calls the shim does not interpose, which must reach NCCL
// straight (no setup traffic anywhere but "init").
#include <string>

#include "driver_common.h"

namespace driver {
namespace {

void intQuery(const std::string& label, const char* function, ncclComm_t comm,
              ncclResult_t (*call)(const ncclComm_t, int*)) {
  int value = -12345;
  step(label, standin::calls::query(function, comm, &value), [&] { return call(comm, &value); });
  report(label, "value", std::to_string(value));
}

}  // namespace

int runNonHooked() {
  int version = 0;
  step("version", standin::calls::getVersion(&version), [&] { return ncclGetVersion(&version); });
  report("version", "value", std::to_string(version));
  ncclComm_t comm = initRank("init", uniqueId("uid"));
  cudaStream_t stream = fakeStream();

  step("bcast", standin::calls::broadcast(gSend, gRecv, 100, ncclFloat32, 0, comm, stream),
       [&] { return ncclBroadcast(gSend, gRecv, 100, ncclFloat32, 0, comm, stream); });
  step("reduce", standin::calls::reduce(gSend + 4, gRecv, 100, ncclInt32, ncclMax, 0, comm, stream),
       [&] { return ncclReduce(gSend + 4, gRecv, 100, ncclInt32, ncclMax, 0, comm, stream); });
  step("allgather", standin::calls::allGather(gSend, gRecv, 64, ncclUint8, comm, stream),
       [&] { return ncclAllGather(gSend, gRecv, 64, ncclUint8, comm, stream); });
  step("rscatter", standin::calls::reduceScatter(gSend, gRecv, 32, ncclBfloat16, ncclSum, comm, stream),
       [&] { return ncclReduceScatter(gSend, gRecv, 32, ncclBfloat16, ncclSum, comm, stream); });
  groupStart("sr.start");
  step("send", standin::calls::send(gSend, 16, ncclInt32, 0, comm, stream),
       [&] { return ncclSend(gSend, 16, ncclInt32, 0, comm, stream); });
  step("recv", standin::calls::recv(gRecv, 16, ncclInt32, 0, comm, stream),
       [&] { return ncclRecv(gRecv, 16, ncclInt32, 0, comm, stream); });
  groupEnd("sr.end");

  intQuery("count", "ncclCommCount", comm, &ncclCommCount);
  intQuery("cudev", "ncclCommCuDevice", comm, &ncclCommCuDevice);
  intQuery("userrank", "ncclCommUserRank", comm, &ncclCommUserRank);
  ncclResult_t async = ncclNumResults;
  step("asyncerr", standin::calls::query("ncclCommGetAsyncError", comm, &async),
       [&] { return ncclCommGetAsyncError(comm, &async); });
  report("asyncerr", "value", std::to_string(static_cast<int>(async)));
  textStep("lasterror", standin::calls::getLastError(comm), [&] { return ncclGetLastError(comm); });
  textStep("errstr", standin::calls::getErrorString(ncclInvalidUsage), [] { return ncclGetErrorString(ncclInvalidUsage); });

  release("destroy", "ncclCommDestroy", comm);
  return 0;
}

}  // namespace driver
