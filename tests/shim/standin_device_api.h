// Two functions of NCCL's device API (nccl_device.h's host side), as the stand-in has them:
// names that nccl.h does not declare and libnccl-car.so does not export, which a program
// linked against NCCL still binds (PyTorch's libtorch_cuda.so links the real two). Through
// every way in, such a name must reach the real library (docs/design.md, "Three ways in").
// The real ones take a requirements struct and a device communicator; here they are opaque.
#pragma once

#include <nccl.h>

extern "C" {
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* requirements, void* devComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm);
}
