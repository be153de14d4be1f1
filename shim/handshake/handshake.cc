#include "handshake/handshake.h"

#include <cstring>

#include "cuda_check.h"
#include "device_guard.h"
#include "exports/fault_injection.h"
#include "handshake/handshake_exchange.h"
#include "ipc/block_retirement.h"
#include "handshake/host_identity.h"
#include "log.h"
#include "handshake/p2p_limit.h"
#include "exports/shim_config.h"
#include "handshake/topology.h"

namespace car {
namespace {

void copyText(char* field, std::size_t size, const std::string& value) {
  std::strncpy(field, value.c_str(), size - 1);
  field[size - 1] = '\0';
}

// Asks NCCL (through the gate) for our rank, the rank count and the device. False, with
// the member's failure set, when it cannot or the count is not ours to take.
bool learnCommunicator(const RealNccl& real, BatchMember& member) {
  CommState& state = *member.state;
  int rank = 0, ranks = 0, device = 0;
  bool known = false;
  const bool asked = state.gate().pass([&] {
    known = real.commUserRank(state.comm(), &rank) == ncclSuccess &&
            real.commCount(state.comm(), &ranks) == ncclSuccess &&
            real.commCuDevice(state.comm(), &device) == ncclSuccess;
  });
  // What NCCL did answer, even on a failure: the log lines name it.
  if (asked) state.learnIdentity(rank, ranks, device);
  if (!asked || !known) {
    member.failure = asked ? "cannot query the real communicator" : kStoppedDuringSetup;
    return false;
  }
  if (!takesWorldSize(ranks)) {
    // Every rank sees the same count, so every rank skips the handshake alike.
    member.failure = worldSizeRefusal(ranks);
    return false;
  }
  return true;
}

// The handshake's own stream and scratch, on the communicator's device (`onDevice`). Once
// both exist the rank takes part in both exchanges whatever fails later, so the peers are
// not left waiting.
bool openHandshake(BatchMember& member, const DeviceGuard& onDevice) {
  CommState& state = *member.state;
  if (onDevice.error() == cudaSuccess &&
      cudaStreamCreateWithFlags(&member.stream, cudaStreamNonBlocking) == cudaSuccess &&
      (member.scratch = takeScratch(state.device())) != nullptr) {
    return true;
  }
  cudaGetLastError();
  member.failure = "CUDA unusable for the handshake";
  CAR_WARN(state.device(), "{}: {}; the peers' handshake cannot complete. All-reduces go to NCCL.", describe(state),
           member.failure);
  member.warned = true;
  return false;
}

// Our record: who we are, where, with which settings. A device that cannot be asked makes the
// status NoDevice; no room for one more block under NCCL_CAR_GPU_MEMORY_BYTES, NoRoom.
void fillRecord(BatchMember& member) {
  const CommState& state = *member.state;
  const ProcessIdentity& self = processIdentity();
  HandshakeRecord& record = member.record;
  record.magic = kHandshakeMagic;
  record.status = RankStatus::Ready;
  record.rank = state.rank();
  record.ranks = state.ranks();
  record.pid = self.pid;
  record.cudaDevice = state.device();
  record.ipcNamespace = self.ipcNamespace;
  record.pidNamespace = self.pidNamespace;
  record.settings = sharedSettingsOf(setupConfig(state.device()));
  record.p2pLimit = static_cast<std::int32_t>(ncclP2pLimit());
  record.boardId = -1;
  copyText(record.host, sizeof(record.host), self.host);
  int major = 0, minor = 0;
  if (cudaDeviceGetPCIBusId(record.busId, sizeof(record.busId), state.device()) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, state.device()) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, state.device()) != cudaSuccess) {
    record.status = RankStatus::NoDevice;
  }
  record.computeCapability = major * 10 + minor;
  if (record.status != RankStatus::Ready) return;
  // Room for our block, before any rank allocates one: every rank learns from the records
  // whether all have it.
  // Blocks kept at a release because a peer still mapped them may be free by now: into the
  // pool first, where this claim can take one.
  blockRetirement().sweep();
  const std::size_t bytes = blockLayoutFor(setupConfig(state.device())).totalBytes;
  member.memory = BlockMemory::claim(blockMemoryPool(), state.device(), bytes, shimConfig().gpuMemoryBytes);
  if (!member.memory) record.status = RankStatus::NoRoom;
}

// Our buffer block, starting with the release board peers attach before they map it. False
// (status NoBoard) when no board could be made.
bool createBlock(BatchMember& member) {
  CommState& state = *member.state;
  std::string problem;
  member.block = BufferBlock::create(&problem);
  if (!member.block) {
    member.record.status = RankStatus::NoBoard;
    CAR_WARN(state.device(), "{}: {}; all-reduces go to NCCL", describe(state), problem);
    member.warned = true;
    return false;
  }
  return true;
}

// The engine, and the block's memory and IPC handle. Status NoBuffers when they cannot be
// made or exported.
void createEngine(BatchMember& member) {
  CommState& state = *member.state;
  EngineOptions options;
  options.device = state.device();
  options.rank = state.rank();
  options.ranks = state.ranks();
  options.config = setupConfig(state.device());
  std::unique_ptr<RankEngine> engine;
  cudaError_t err = faultActive(Fault::NoBuffers) ? cudaErrorMemoryAllocation
                                                   : RankEngine::create(options, &state.counters(), &engine);
  if (err == cudaSuccess) err = member.block->allocate(std::move(member.memory), blockLayoutFor(options.config), member.stream);
  if (err != cudaSuccess) {
    cudaGetLastError();
    engine.reset();  // the block was never exported: nobody got its handle
    member.record.status = RankStatus::NoBuffers;
    CAR_WARN(state.device(), "{}: cannot allocate or export our buffers ({}); all-reduces go to NCCL",
             describe(state), cudaGetErrorString(err));
    member.warned = true;
    return;
  }
  state.lock().installEngine(std::move(engine));
}

// Everything before the first exchange, which says who we are, not yet where our block is:
// nothing is allocated before the verdict on those records. A failure after the scratch
// exists still takes part (the record's status says so), so the peers are not left waiting.
void prepare(const RealNccl& real, BatchMember& member) {
  if (!learnCommunicator(real, member)) return;
  DeviceGuard guard(member.state->device());  // what follows runs on the communicator's device
  if (!openHandshake(member, guard)) return;
  member.inHandshake = true;
  fillRecord(member);
}

// After the first exchange, our block and engine, for a communicator every rank judged
// eligible so far (the same bytes, one function: the same verdict on every rank); then the
// same record, with the block in it, for the second exchange. A communicator we do not take
// allocates nothing; its ranks still make the later exchanges, as every rank in the
// handshake does whatever it judged, so that no rank waits in an all-gather another one
// skipped. A rank whose own part failed says it cannot take part.
void provideBlock(BatchMember& member) {
  if (!member.failure.empty()) {
    member.record.status = RankStatus::NoDevice;
    return;
  }
  if (!judgeRecords(member.records).eligible) return;
  DeviceGuard guard(member.state->device());
  if (!createBlock(member)) return;
  createEngine(member);
  member.block->publish(&member.record);
}

// Tries to reach every peer, if the records allow it, and writes our link report.
void mapPeers(BatchMember& member) {
  CommState& state = *member.state;
  LinkReport& report = member.report;
  report.magic = kHandshakeMagic;
  if (!member.failure.empty()) {
    copyText(report.problem, sizeof(report.problem), member.failure);
    return;
  }
  member.verdict = judgeRecords(member.records);
  if (!member.verdict.eligible) return;
  if (!member.block) {  // the first exchange's records, which every rank judged alike, said no
    copyText(report.problem, sizeof(report.problem), "no buffer block: the first exchange found it not ours");
    return;
  }
  std::string problem;
  if (!member.block->mapPeers(member.records, state.rank(), &member.bases, &problem)) {
    copyText(report.problem, sizeof(report.problem), problem);
    return;
  }
  report.mapped = 1;
  DeviceGuard guard(state.device());
  for (int p = 0; p < state.ranks(); ++p) {
    const PairLink link = p == state.rank() ? PairLink{true, true}
                                          : linkBetween(state.device(), fieldText(member.record.busId),
                                                        fieldText(member.records[p].busId));
    report.p2pMask |= static_cast<std::uint32_t>(link.p2p) << p;
    report.nvlinkMask |= static_cast<std::uint32_t>(link.nvlink) << p;
  }
  report.nvmlMissing = nvmlAvailable() ? 0 : 1;
}

// What the handshake made, given back: the engine (none of its kernels ever ran), then the
// block, which peers may have mapped.
void letGo(CommState::Locked& locked, BatchMember& member) {
  locked.takeEngine().reset();
  BufferBlock::retire(std::move(member.block), describe(*member.state));
}

void conclude(BatchMember& member) {
  CommState& state = *member.state;
  CommState::Locked locked = state.lock();
  if (locked.phase() == CommPhase::Released) {
    // Destroyed or aborted while we were setting it up: nothing of ours ran on it.
    letGo(locked, member);
    CAR_INFO(state.device(), "{} released during set-up", describe(state));
    return;
  }
  Verdict verdict;
  if (state.stopRequested()) {
    verdict.reason = "revoked or shrunk with NCCL_SHRINK_ABORT during set-up";
  } else if (!member.failure.empty()) {
    verdict.reason = member.failure;
    verdict.unexpected = takesWorldSize(state.ranks());  // else simply not our size
  } else {
    verdict = judgeLinks(member.records, member.reports);
  }
  if (verdict.eligible && locked.engine() != nullptr) {
    locked.engine()->attachPeers(member.bases.data(), member.block->layout(), verdict.fullNvlink,
                                 verdict.computeCapability);
    locked.becomeReady(std::move(member.block), verdict);
    return;
  }
  letGo(locked, member);
  if (verdict.differingVariable != nullptr) {
    CAR_WARN(state.device(), "{}: {}; set it the same on every rank. All-reduces go to NCCL.", describe(state),
             verdict.reason);
  } else if (verdict.unexpected && !member.warned) {
    CAR_WARN(state.device(), "{}: {}. All-reduces go to NCCL.", describe(state), verdict.reason);
  }
  locked.becomeIneligible(IneligibleCause::Verdict, verdict.reason);
}

}  // namespace

void runHandshakes(const RealNccl& real, const std::vector<std::shared_ptr<CommState>>& states) {
  std::vector<BatchMember> members(states.size());
  bool anyInHandshake = false;
  for (std::size_t i = 0; i < states.size(); ++i) {
    members[i].state = states[i];
    prepare(real, members[i]);
    anyInHandshake = anyInHandshake || members[i].inHandshake;
  }
  if (anyInHandshake) {  // e.g. only 1-rank communicators: no collective at all
    // Who, where, with which settings: enough for the verdict of a communicator we do not take.
    exchangeRecords(real, cudaHandshakeDevice(), members);
    for (BatchMember& member : members) {
      if (member.inHandshake) provideBlock(member);
    }
    // The records again, with every rank's block: what mapping the peers needs.
    exchangeRecords(real, cudaHandshakeDevice(), members);
    for (BatchMember& member : members) {
      if (member.inHandshake) mapPeers(member);
    }
    exchangeReports(real, cudaHandshakeDevice(), members);
  }
  for (BatchMember& member : members) {
    conclude(member);
    if (member.stream == nullptr) continue;
    DeviceGuard guard(member.state->device());
    // An all-gather NCCL did not stop may still write the scratch: it is never reused.
    if (member.scratch != nullptr && !member.deviceBusy) returnScratch(member.state->device(), member.scratch);
    // Returns at once; CUDA frees the stream when its work is done.
    CAR_CUDA_RELEASE(member.state->device(), cudaStreamDestroy(member.stream));
  }
}

}  // namespace car
