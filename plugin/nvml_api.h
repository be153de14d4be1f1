// The few NVML functions the library uses, loaded at run time (nvml.h is not always installed,
// and a machine without NVML must still work): peer status and the PCIe path between two GPUs
// for the handshake's topology, and the GPUs, their NVLinks and the driver for a machine's
// fingerprint. One loader for both.
#pragma once

namespace car::nvml {

using Return = int;
using Device = struct DeviceOpaque*;
constexpr Return kSuccess = 0;
constexpr int kP2PCapsRead = 0;
constexpr int kP2PCapsWrite = 1;
constexpr int kP2PCapsNvlink = 2;
constexpr int kP2PStatusOk = 0;
constexpr int kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS of NVML 12 and 13

struct Api {
  Return (*handleByBusId)(const char*, Device*) = nullptr;
  Return (*p2pStatus)(Device, Device, int, int*) = nullptr;
  Return (*count)(unsigned*) = nullptr;
  Return (*handleByIndex)(unsigned, Device*) = nullptr;
  Return (*nvLinkState)(Device, unsigned, int*) = nullptr;  // may be null (an old NVML)
  Return (*driverVersion)(char*, unsigned) = nullptr;       // "580.159.04"; may be null
  // nvmlDeviceGetTopologyCommonAncestor: the PCIe path between two GPUs, an
  // nvmlGpuTopologyLevel_t (shim/handshake/p2p_limit.h reads it); may be null (then unknown).
  Return (*topologyAncestor)(Device, Device, int*) = nullptr;
  bool ok = false;  // loaded and initialised; then all but those marked "may be null" are set
};

// NVML, loaded and initialised once per process; api().ok is false without it.
const Api& api();

}  // namespace car::nvml
