// The stand-in's device-API functions (standin_device_api.h), recorded like every other call,
// and their pnccl* twins, as NCCL exports them.
#include "standin_device_api.h"

#include "standin_nccl.h"

extern "C" {

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* requirements, void* devComm) {
  standin::CallLine line("ncclDevCommCreate");
  line.ptr("comm", comm).ptr("reqs", requirements).ptr("devcomm", devComm);
  const ncclResult_t checked = standin::checkComm(comm, line);
  return standin::finish(line, "ncclDevCommCreate", checked);
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm) {
  standin::CallLine line("ncclDevCommDestroy");
  line.ptr("comm", comm).ptr("devcomm", devComm);
  const ncclResult_t checked = standin::checkComm(comm, line);
  return standin::finish(line, "ncclDevCommDestroy", checked);
}

ncclResult_t pncclDevCommCreate(ncclComm_t comm, const void* requirements, void* devComm) {
  return ncclDevCommCreate(comm, requirements, devComm);
}

ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const void* devComm) { return ncclDevCommDestroy(comm, devComm); }

}  // extern "C"
