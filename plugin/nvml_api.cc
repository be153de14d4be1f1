#include "nvml_api.h"

#include <dlfcn.h>

#include <mutex>

namespace car::nvml {

const Api& api() {
  static Api loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    auto init = reinterpret_cast<Return (*)()>(dlsym(lib, "nvmlInit_v2"));
    loaded.handleByBusId = reinterpret_cast<decltype(loaded.handleByBusId)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    loaded.p2pStatus = reinterpret_cast<decltype(loaded.p2pStatus)>(dlsym(lib, "nvmlDeviceGetP2PStatus"));
    loaded.count = reinterpret_cast<decltype(loaded.count)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    loaded.handleByIndex = reinterpret_cast<decltype(loaded.handleByIndex)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    loaded.nvLinkState = reinterpret_cast<decltype(loaded.nvLinkState)>(dlsym(lib, "nvmlDeviceGetNvLinkState"));
    loaded.driverVersion = reinterpret_cast<decltype(loaded.driverVersion)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
    loaded.topologyAncestor =
        reinterpret_cast<decltype(loaded.topologyAncestor)>(dlsym(lib, "nvmlDeviceGetTopologyCommonAncestor"));
    loaded.ok = init != nullptr && loaded.handleByBusId != nullptr && loaded.p2pStatus != nullptr &&
                loaded.count != nullptr && loaded.handleByIndex != nullptr && init() == kSuccess;
  });
  return loaded;
}

}  // namespace car::nvml
