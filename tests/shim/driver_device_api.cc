// Scenario "device-api": a program linked against NCCL that binds two functions nccl.h lacks
// (standin_device_api.h, as PyTorch binds NCCL's device API) beside a hooked one. Every way
// in must let it start and reach both: the device API in NCCL, the all-reduce through us.
#include <string>

#include "driver_common.h"
#include "standin_device_api.h"

namespace driver {

int runDeviceApi() {
  ncclComm_t comm = initRank("init", uniqueId("uid"));
  alignas(64) static char devComm[64];
  step("devcreate", standin::CallLine("ncclDevCommCreate").ptr("comm", comm).ptr("reqs", gSend).ptr("devcomm", devComm),
       [&] { return ncclDevCommCreate(comm, gSend, devComm); });
  allReduce("ar", gSend, gRecv, 256, ncclFloat32, ncclSum, comm);
  step("devdestroy", standin::CallLine("ncclDevCommDestroy").ptr("comm", comm).ptr("devcomm", devComm),
       [&] { return ncclDevCommDestroy(comm, devComm); });
  release("destroy", "ncclCommDestroy", comm);
  return 0;
}

}  // namespace driver
