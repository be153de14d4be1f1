// NCCL's own peer-to-peer settings, read the way NCCL 2.28 reads them, so that we never use
// peer access where the user told NCCL not to. NCCL_P2P_DISABLE=1 wins; NCCL_P2P_LEVEL is a
// path name (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS) or NCCL's old numbers (0 LOC,
// 1 PIX, 2 PXB, 3 PHB, 4 and up SYS); anything else leaves NCCL's default.
//
// A pair of GPUs without NVLink reaches the other over PCIe, along a path NVML names
// (nvmlDeviceGetTopologyCommonAncestor, shim/handshake/topology.h), which we read as NCCL's
// path types: PIX (one PCIe switch, or one board), PXB (several switches), PHB (through the
// CPU's host bridge, within one socket), SYS (across CPU sockets). A level allows the paths up
// to it, as NCCL compares them; NVL, NVB and C2C allow NVLink only. Without a level, NCCL's
// default depends on the CPU (it may or may not use PCIe peer access through a host bridge);
// we take PCIe paths up to PHB then, never across sockets: SYS must be asked for.
#pragma once

#include <cstdint>

namespace car {

enum class P2pLimit : std::int32_t {
  None = 0,        // unset or unknown: NVLink, and PCIe within one CPU socket (up to PHB)
  NvlinkOnly = 1,  // NVL, NVB, C2C
  Off = 2,         // NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC (or 0)
  UpToPix = 3,     // PIX (or 1)
  UpToPxb = 4,     // PXB, P2C, PXN (or 2): NCCL orders P2C and PXN between PXB and PHB
  UpToPhb = 5,     // PHB (or 3)
  AnyPath = 6,     // SYS (or 4 and above): across CPU sockets too
};
constexpr std::int32_t kP2pLimitCount = 7;

// The PCIe path between two GPUs that have no NVLink, in NCCL's terms, from NVML's answer.
// Ordered: a longer path has a larger value.
enum class PciePath : std::uint8_t {
  Unknown = 0,  // NVML could not tell (not loaded, or it failed)
  Pix = 1,      // NVML_TOPOLOGY_INTERNAL or SINGLE: one board, or one PCIe switch
  Pxb = 2,      // NVML_TOPOLOGY_MULTIPLE: several PCIe switches, no host bridge
  Phb = 3,      // NVML_TOPOLOGY_HOSTBRIDGE or NODE: through the host bridge(s) of one CPU socket
  Sys = 4,      // NVML_TOPOLOGY_SYSTEM: across CPU sockets
};

// "PIX", "PXB", "PHB", "SYS", "unknown".
const char* pciePathName(PciePath path);

// NVML's nvmlGpuTopologyLevel_t value as a path (anything else: Unknown).
PciePath pciePathOfNvmlLevel(int level);

// Whether `limit` lets peer access go over PCIe along `path` (an unknown path: never).
bool p2pLimitAllows(P2pLimit limit, PciePath path);

// Of two ranks' limits, the one that allows less (the most restrictive applies to all ranks).
P2pLimit stricterP2pLimit(P2pLimit a, P2pLimit b);

// "NCCL_P2P_LEVEL=PXB" and the like, for the verdict's reasons; "no NCCL_P2P_LEVEL" for None.
const char* p2pLimitText(P2pLimit limit);

// Pure: the two variables' values (null when unset).
P2pLimit parseP2pLimit(const char* disable, const char* level);

// This process's setting, read once.
P2pLimit ncclP2pLimit();

}  // namespace car
