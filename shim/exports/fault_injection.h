// Test-only fault switches: NCCL_CAR_TEST_FAULT=<name>[,<name>...] makes the named setup
// step fail as it would for real, so tests can check that every rank then forwards; `pcie`
// and `pcie-sys` make the set-up see a machine without NVLink instead, so that the one-GPU
// rig and the CPU tests take the PCIe path (shim/handshake/topology.h, underTestTopology).
// Read once; unknown names are ignored with a WARN. Not a user setting.
//
// A name alone applies to every rank, every time it is reached. "<name>@R" applies to rank R
// of a communicator only, and only the first time it is reached in the process (ranks may be
// threads of one process, as in tests/fake_cuda/): one rank's one set-up fails, the next
// communicator's does not.
#pragma once

#include <cstddef>

namespace car {

enum class Fault {
  NoNvml,        // behave as if libnvidia-ml.so.1 were missing
  NoBuffers,     // the buffer block allocation fails (device memory exhausted)
  IpcOpen,       // cudaIpcOpenMemHandle fails on this rank
  LaunchError,   // every taken call fails once its kernel is queued (Config::testLaunchFailure)
  // advance-throw: the set-up's step on the worker throws once this rank published its block
  // (SetUp::advance), as an internal error there would.
  AdvanceThrow,
  // board-throw: creating a release board throws after shmat, in the bookkeeping that
  // follows it (SysvReleaseBoard::create).
  BoardThrow,
  // give-up-before-agreement: once every rank published its link report (every block is
  // mapped everywhere), this rank's set-up gives up before it joins the agreement on the first
  // call taken, as at its bound: the ranks never agree, and the others are Agreeing or about to be.
  GiveUpBeforeAgreement,
  // slow-retire: the set-up's retirement of its block (SetUp::letGoOf) takes kSlowRetireSeconds
  // longer, as a retirement waiting for an importer in another process does.
  SlowRetire,
  // slow-launcher: the set-up's launcher, made on the worker, reaches its communicator
  // kSlowRetireSeconds later (SetUp::createBlockAndLauncher), as a slow allocation would: a
  // communicator ended meanwhile meets a launcher its release could not take.
  SlowLauncher,
  // record-throw: filling this rank's handshake record throws once its board exists
  // (SetUp::claimBoardAndRoom), as an internal error there would: the rank still sends a record.
  RecordThrow,
  // grow-block: each set-up of a rank makes its block kGrowBlockBytes larger than that rank's
  // set-up before (as blocks of settings that changed would be): a block meets kept memory of
  // another size.
  GrowBlock,
  PcieOnly,      // "pcie": every pair of ranks' GPUs (the same GPU too) as over PCIe, through one switch
  PcieAcrossSockets,  // "pcie-sys": the same, across CPU sockets
  kCount,
};

constexpr double kSlowRetireSeconds = 2.0;
constexpr std::size_t kGrowBlockBytes = std::size_t{64} << 10;

// Whether `fault` is named (with or without a rank).
bool faultActive(Fault fault);

// Whether `fault` fires here, on `rank` of a communicator: always when named alone; when
// named "@R", on rank R the first time only.
bool faultFires(Fault fault, int rank);

// grow-block: the bytes this rank's next block grows by (0 for its first, kGrowBlockBytes
// for its second, ...); 0 when the fault is not named.
std::size_t faultBlockGrowth(int rank);

}  // namespace car
