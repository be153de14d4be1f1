#include "handshake/topology.h"

#include <cuda_runtime_api.h>
#include <strings.h>

#include "exports/fault_injection.h"
#include "nvml_api.h"

namespace car {
namespace {

// NVML as the handshake sees it: absent under the test fault no-nvml.
const nvml::Api* usableNvml() {
  if (faultActive(Fault::NoNvml)) return nullptr;
  const nvml::Api& api = nvml::api();
  return api.ok ? &api : nullptr;
}

bool nvmlSays(const std::string& a, const std::string& b, int capability) {
  const nvml::Api* api = usableNvml();
  if (api == nullptr) return false;
  nvml::Device da = nullptr, db = nullptr;
  int status = -1;
  return api->handleByBusId(a.c_str(), &da) == nvml::kSuccess && api->handleByBusId(b.c_str(), &db) == nvml::kSuccess &&
         api->p2pStatus(da, db, capability, &status) == nvml::kSuccess && status == nvml::kP2PStatusOk;
}

}  // namespace

bool nvmlAvailable() { return usableNvml() != nullptr; }

PairLink linkBetween(int myDevice, const std::string& myBusId, const std::string& peerBusId) {
  PairLink link;
  if (strcasecmp(myBusId.c_str(), peerBusId.c_str()) == 0) {
    link.p2p = link.nvlink = true;
    return link;
  }
  link.nvlink = nvmlSays(myBusId, peerBusId, nvml::kP2PCapsNvlink);
  int peerDevice = -1;
  if (cudaDeviceGetByPCIBusId(&peerDevice, peerBusId.c_str()) == cudaSuccess) {
    int canAccess = 0;
    link.p2p = cudaDeviceCanAccessPeer(&canAccess, myDevice, peerDevice) == cudaSuccess && canAccess != 0;
  } else {
    cudaGetLastError();  // the peer's GPU is not visible here (CUDA_VISIBLE_DEVICES): ask NVML
    link.p2p = nvmlSays(myBusId, peerBusId, nvml::kP2PCapsRead);
  }
  return link;
}

}  // namespace car
