// Test-only fault switches: NCCL_CAR_TEST_FAULT=<name>[,<name>...] makes the named setup
// step fail as it would for real, so tests can check that every rank then forwards.
// Read once; unknown names are ignored with a WARN. Not a user setting.
#pragma once

namespace car {

enum class Fault {
  NoNvml,        // behave as if libnvidia-ml.so.1 were missing
  NoBuffers,     // the buffer block allocation fails (device memory exhausted)
  IpcOpen,       // cudaIpcOpenMemHandle fails on this rank
  LaunchError,   // every taken call fails once its kernel is queued (Config::testLaunchFailure)
};

bool faultActive(Fault fault);

}  // namespace car
