// What a choice table measured here depends on, as one line of text, and its fingerprint: the
// GPU model, every GPU of the machine with its active NVLinks (from NVML, so what a process's
// CUDA_VISIBLE_DEVICES hides still counts), the driver, the CUDA runtime, the real NCCL and this
// library's build. A table is followed only on a machine with its fingerprint
// (plugin/choice_table.h); the tool (`nccl_car_query fingerprint`) and the library compute it
// here, the one place.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace car {

struct MachineDescription {
  std::string text;  // "nccl-car 0.1.0+1a2b3c4; NVIDIA H200 sm_90; gpus 8, nvlinks 18 18 ...; ..."
  std::uint64_t fingerprint = 0;
};

// The machine as CUDA device `device` sees it, under a real NCCL of version `ncclVersion`
// (ncclGetVersion's code, 0 when unknown). Fails with CUDA's error when the device cannot
// be asked.
cudaError_t describeMachine(int device, int ncclVersion, MachineDescription* out);

// This library's version and build, as the fingerprint names it.
const char* libraryBuild();

}  // namespace car
