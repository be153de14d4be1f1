#include "handshake/topology.h"

#include <cuda_runtime_api.h>
#include <strings.h>

#include "exports/fault_injection.h"

namespace car {
namespace {

// NVML as the handshake sees it: absent under the test fault no-nvml.
const nvml::Api* usableNvml() {
  if (faultActive(Fault::NoNvml)) return nullptr;
  const nvml::Api& api = nvml::api();
  return api.ok ? &api : nullptr;
}

bool sameBusId(const std::string& a, const std::string& b) { return strcasecmp(a.c_str(), b.c_str()) == 0; }

}  // namespace

bool nvmlAvailable() { return usableNvml() != nullptr; }

PairLink probeLink(const nvml::Api* nvml, std::optional<bool> cudaAccess, const std::string& myBusId,
                   const std::string& peerBusId) {
  PairLink link;
  nvml::Device mine = nullptr, peer = nullptr;
  const bool handles = nvml != nullptr && nvml->handleByBusId(myBusId.c_str(), &mine) == nvml::kSuccess &&
                       nvml->handleByBusId(peerBusId.c_str(), &peer) == nvml::kSuccess;
  auto status = [&](int capability) {
    int answer = -1;
    return handles && nvml->p2pStatus(mine, peer, capability, &answer) == nvml::kSuccess &&
           answer == nvml::kP2PStatusOk;
  };
  link.nvlink = status(nvml::kP2PCapsNvlink);
  link.nvmlWrite = status(nvml::kP2PCapsWrite);
  link.p2p = cudaAccess ? *cudaAccess : status(nvml::kP2PCapsRead);
  int level = -1;
  if (handles && nvml->topologyAncestor != nullptr && nvml->topologyAncestor(mine, peer, &level) == nvml::kSuccess) {
    link.path = pciePathOfNvmlLevel(level);
  }
  return link;
}

PairLink sameGpuLink() { return PairLink{true, true, true, PciePath::Unknown}; }

PairLink linkBetween(int myDevice, const std::string& myBusId, const std::string& peerBusId) {
  if (sameBusId(myBusId, peerBusId)) return sameGpuLink();
  std::optional<bool> cudaAccess;
  int peerDevice = -1;
  if (cudaDeviceGetByPCIBusId(&peerDevice, peerBusId.c_str()) == cudaSuccess) {
    int canAccess = 0;
    cudaAccess = cudaDeviceCanAccessPeer(&canAccess, myDevice, peerDevice) == cudaSuccess && canAccess != 0;
  } else {
    cudaGetLastError();  // the peer's GPU is not visible here (CUDA_VISIBLE_DEVICES): ask NVML
  }
  return probeLink(usableNvml(), cudaAccess, myBusId, peerBusId);
}

PairLink underTestTopology(PairLink link) {
  const bool acrossSockets = faultActive(Fault::PcieAcrossSockets);
  if (!acrossSockets && !faultActive(Fault::PcieOnly)) return link;
  link.nvlink = false;
  link.nvmlWrite = link.p2p;
  link.path = link.p2p ? (acrossSockets ? PciePath::Sys : PciePath::Pix) : PciePath::Unknown;
  return link;
}

void measureLinks(int myDevice, int myRank, const std::vector<HandshakeRecord>& records, LinkReport* report) {
  const std::string mine = fieldText(records[static_cast<std::size_t>(myRank)].busId);
  for (std::size_t p = 0; p < records.size(); ++p) {
    const PairLink link = static_cast<int>(p) == myRank
                              ? sameGpuLink()
                              : underTestTopology(linkBetween(myDevice, mine, fieldText(records[p].busId)));
    report->p2pMask |= static_cast<std::uint32_t>(link.p2p) << p;
    report->nvlinkMask |= static_cast<std::uint32_t>(link.nvlink) << p;
    report->nvmlWriteMask |= static_cast<std::uint32_t>(link.nvmlWrite) << p;
    report->pciePath[p] = static_cast<std::uint8_t>(link.path);
  }
  report->nvmlMissing = nvmlAvailable() ? 0 : 1;
}

}  // namespace car
