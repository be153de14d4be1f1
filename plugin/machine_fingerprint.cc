#include "machine_fingerprint.h"

#include <fmt/format.h>

#include "car_build_id.h"  // generated at every build: NCCL_CAR_BUILD_ID
#include "choice_table.h"
#include "nvml_api.h"

namespace car {
namespace {

// "gpus 8, nvlinks 18 18 18 18 18 18 18 18": the GPUs and, for each, its active NVLinks.
std::string gpusAndLinks() {
  const nvml::Api& api = nvml::api();
  unsigned count = 0;
  if (!api.ok || api.count(&count) != nvml::kSuccess) return "gpus unknown (no NVML)";
  std::string text = fmt::format("gpus {}, nvlinks", count);
  for (unsigned index = 0; index < count; ++index) {
    nvml::Device device = nullptr;
    int active = 0;
    if (api.handleByIndex(index, &device) == nvml::kSuccess && api.nvLinkState != nullptr) {
      for (unsigned link = 0; link < nvml::kMaxNvLinks; ++link) {
        int isActive = 0;
        if (api.nvLinkState(device, link, &isActive) == nvml::kSuccess && isActive != 0) ++active;
      }
    }
    text += fmt::format(" {}", active);
  }
  return text;
}

// The kernel driver's own version ("580.159.04"): cudaDriverGetVersion gives only the CUDA
// version it supports, which stays the same across driver updates that can change timings.
std::string driverRelease() {
  const nvml::Api& api = nvml::api();
  char version[96] = {};
  if (!api.ok || api.driverVersion == nullptr || api.driverVersion(version, sizeof(version)) != nvml::kSuccess) {
    return "unknown";
  }
  return version;
}

}  // namespace

const char* libraryBuild() { return NCCL_CAR_BUILD_ID; }

cudaError_t describeMachine(int device, int ncclVersion, MachineDescription* out) {
  cudaDeviceProp properties{};
  cudaError_t err = cudaGetDeviceProperties(&properties, device);
  int driver = 0;
  if (err == cudaSuccess) err = cudaDriverGetVersion(&driver);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return err;
  }
  out->text = fmt::format("nccl-car {}; {} sm_{}{}; {}; driver {} (cuda {}); cuda runtime {}; nccl {}", libraryBuild(),
                          properties.name, properties.major, properties.minor, gpusAndLinks(), driverRelease(), driver,
                          CUDART_VERSION, ncclVersion);
  out->fingerprint = fnv1a64(out->text);
  return cudaSuccess;
}

}  // namespace car
