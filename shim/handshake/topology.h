// How this rank's GPU reaches another GPU: NVLink, NVML's P2P write status and the PCIe path
// from NVML (loaded at run time; a machine without it simply reports none of them), peer
// access from CUDA where the peer's GPU is visible to this process, else from NVML.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "handshake/handshake_record.h"
#include "handshake/p2p_limit.h"
#include "nvml_api.h"

namespace car {

struct PairLink {
  bool p2p = false;        // CUDA's peer access (NVML's read status where CUDA cannot see the peer's GPU)
  bool nvlink = false;     // NVML: NVLink between the two GPUs
  bool nvmlWrite = false;  // NVML: this GPU may write the other's memory (P2P write status OK)
  PciePath path = PciePath::Unknown;  // NVML: the PCIe path between them (their common ancestor)
};

// What CUDA and NVML say about two different GPUs, by bus id. `nvml` null: NVML is missing
// (no NVLink, no write status, an unknown path). `cudaAccess`: cudaDeviceCanAccessPeer's
// answer where the peer's GPU is visible to this process, nullopt where it is not (then NVML's
// read status stands in). No CUDA call: the CPU tests give it a fake NVML.
PairLink probeLink(const nvml::Api* nvml, std::optional<bool> cudaAccess, const std::string& myBusId,
                   const std::string& peerBusId);

// Two ranks on the same GPU: connected both ways, NVLink included.
PairLink sameGpuLink();

// Bus ids as CUDA prints them ("0000:3B:00.0"). The same bus id means the same GPU.
PairLink linkBetween(int myDevice, const std::string& myBusId, const std::string& peerBusId);

// Test only (NCCL_CAR_TEST_FAULT=pcie or pcie-sys, shim/exports/fault_injection.h): `link`
// as a machine without NVLink would report it, CUDA and NVML agreeing on peer access, through
// one PCIe switch (pcie) or across CPU sockets (pcie-sys); `link` itself otherwise. Lets the
// one-GPU rig and the CPU tests take the PCIe path.
PairLink underTestTopology(PairLink link);

// This rank's link report: bit p of its masks and pciePath[p] for the GPU of every rank p
// (records[p].busId), measured from CUDA device `myDevice`, and whether NVML is missing here.
void measureLinks(int myDevice, int myRank, const std::vector<HandshakeRecord>& records, LinkReport* report);

// Whether NVML could be loaded (for the log).
bool nvmlAvailable();

}  // namespace car
