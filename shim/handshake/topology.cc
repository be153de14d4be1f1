#include "handshake/topology.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <strings.h>

#include <mutex>

#include "exports/fault_injection.h"

namespace car {
namespace {

// The few NVML declarations we need (nvml.h is not always installed). Values are NVML's.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlP2PCapsRead = 0;
constexpr int kNvmlP2PCapsNvlink = 2;
constexpr int kNvmlP2PStatusOk = 0;

struct Nvml {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*handleByBusId)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*p2pStatus)(NvmlDevice, NvmlDevice, int, int*) = nullptr;
  bool ok = false;
};

const Nvml& nvml() {
  static Nvml api;
  static std::once_flag once;
  std::call_once(once, [] {
    if (faultActive(Fault::NoNvml)) return;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    api.init = reinterpret_cast<decltype(api.init)>(dlsym(lib, "nvmlInit_v2"));
    api.handleByBusId = reinterpret_cast<decltype(api.handleByBusId)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    api.p2pStatus = reinterpret_cast<decltype(api.p2pStatus)>(dlsym(lib, "nvmlDeviceGetP2PStatus"));
    api.ok = api.init && api.handleByBusId && api.p2pStatus && api.init() == kNvmlSuccess;
  });
  return api;
}

bool nvmlSays(const std::string& a, const std::string& b, int capability) {
  const Nvml& api = nvml();
  if (!api.ok) return false;
  NvmlDevice da = nullptr, db = nullptr;
  int status = -1;
  return api.handleByBusId(a.c_str(), &da) == kNvmlSuccess && api.handleByBusId(b.c_str(), &db) == kNvmlSuccess &&
         api.p2pStatus(da, db, capability, &status) == kNvmlSuccess && status == kNvmlP2PStatusOk;
}

}  // namespace

bool nvmlAvailable() { return nvml().ok; }

PairLink linkBetween(int myDevice, const std::string& myBusId, const std::string& peerBusId) {
  PairLink link;
  if (strcasecmp(myBusId.c_str(), peerBusId.c_str()) == 0) {
    link.p2p = link.nvlink = true;
    return link;
  }
  link.nvlink = nvmlSays(myBusId, peerBusId, kNvmlP2PCapsNvlink);
  int peerDevice = -1;
  if (cudaDeviceGetByPCIBusId(&peerDevice, peerBusId.c_str()) == cudaSuccess) {
    int canAccess = 0;
    link.p2p = cudaDeviceCanAccessPeer(&canAccess, myDevice, peerDevice) == cudaSuccess && canAccess != 0;
  } else {
    cudaGetLastError();  // the peer's GPU is not visible here (CUDA_VISIBLE_DEVICES): ask NVML
    link.p2p = nvmlSays(myBusId, peerBusId, kNvmlP2PCapsRead);
  }
  return link;
}

}  // namespace car
