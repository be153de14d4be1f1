// Test-only fault switches: NCCL_CAR_TEST_FAULT=<name>[,<name>...] makes the named setup
// step fail as it would for real, so tests can check that every rank then forwards; `pcie`
// and `pcie-sys` make the set-up see a machine without NVLink instead, so that the one-GPU
// rig and the CPU tests take the PCIe path (shim/handshake/topology.h, underTestTopology).
// Read once; unknown names are ignored with a WARN. Not a user setting.
#pragma once

namespace car {

enum class Fault {
  NoNvml,        // behave as if libnvidia-ml.so.1 were missing
  NoBuffers,     // the buffer block allocation fails (device memory exhausted)
  IpcOpen,       // cudaIpcOpenMemHandle fails on this rank
  LaunchError,   // every taken call fails once its kernel is queued (Config::testLaunchFailure)
  PcieOnly,      // "pcie": every pair of ranks' GPUs (the same GPU too) as over PCIe, through one switch
  PcieAcrossSockets,  // "pcie-sys": the same, across CPU sockets
};

bool faultActive(Fault fault);

}  // namespace car
