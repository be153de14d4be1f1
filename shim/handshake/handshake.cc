#include "handshake/handshake.h"

#include <cstring>

#include "cuda_check.h"
#include "device_guard.h"
#include "exports/fault_injection.h"
#include "handshake/handshake_exchange.h"
#include "handshake/host_identity.h"
#include "log.h"
#include "handshake/p2p_limit.h"
#include "lifecycle/release.h"
#include "exports/shim_config.h"
#include "handshake/topology.h"

namespace car {
namespace {

void copyText(char* field, std::size_t size, const std::string& value) {
  std::strncpy(field, value.c_str(), size - 1);
  field[size - 1] = '\0';
}

// Asks NCCL (through the gate) for our rank, the rank count and the device. False, with
// the slot's failure set, when it cannot or the count is not ours to take.
bool learnCommunicator(const RealNccl& real, Slot& slot) {
  CommState& state = *slot.state;
  bool known = false;
  const bool asked = state.gate.pass([&] {
    known = real.commUserRank(state.comm, &state.rank) == ncclSuccess &&
            real.commCount(state.comm, &state.ranks) == ncclSuccess &&
            real.commCuDevice(state.comm, &state.device) == ncclSuccess;
  });
  if (!asked || !known) {
    slot.failure = asked ? "cannot query the real communicator" : kStoppedDuringSetup;
    return false;
  }
  if (state.ranks < 2 || state.ranks > kMaxRanks) {
    // Every rank sees the same count, so every rank skips the handshake alike.
    slot.failure = fmt::format("{} ranks (we take 2 to {})", state.ranks, kMaxRanks);
    return false;
  }
  return true;
}

// The handshake's own stream and scratch, on the communicator's device (`onDevice`). Once
// both exist the rank takes part in both exchanges whatever fails later, so the peers are
// not left waiting.
bool openHandshake(Slot& slot, const DeviceGuard& onDevice) {
  CommState& state = *slot.state;
  if (onDevice.error() == cudaSuccess &&
      cudaStreamCreateWithFlags(&slot.stream, cudaStreamNonBlocking) == cudaSuccess &&
      (slot.scratch = takeScratch(state.device)) != nullptr) {
    return true;
  }
  cudaGetLastError();
  slot.failure = "CUDA unusable for the handshake";
  CAR_WARN(state.device, "{}: {}; the peers' handshake cannot complete. All-reduces go to NCCL.", describe(state),
           slot.failure);
  slot.warned = true;
  return false;
}

// Our record: who we are, where, with which settings. A device that cannot be asked
// makes the status NoDevice.
void fillRecord(Slot& slot) {
  const CommState& state = *slot.state;
  const ProcessIdentity& self = processIdentity();
  HandshakeRecord& record = slot.record;
  record.magic = kHandshakeMagic;
  record.status = RankStatus::Ready;
  record.rank = state.rank;
  record.ranks = state.ranks;
  record.pid = self.pid;
  record.cudaDevice = state.device;
  record.ipcNamespace = self.ipcNamespace;
  record.pidNamespace = self.pidNamespace;
  record.settings = sharedSettingsOf(shimConfig());
  record.p2pLimit = static_cast<std::int32_t>(ncclP2pLimit());
  record.boardId = -1;
  copyText(record.host, sizeof(record.host), self.host);
  int major = 0, minor = 0;
  if (cudaDeviceGetPCIBusId(record.busId, sizeof(record.busId), state.device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, state.device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, state.device) != cudaSuccess) {
    record.status = RankStatus::NoDevice;
  }
  record.computeCapability = major * 10 + minor;
}

// The release board peers attach before they map our block. False (status NoBoard) when
// none could be made.
bool createBoard(Slot& slot) {
  CommState& state = *slot.state;
  std::string problem;
  state.board = SysvReleaseBoard::create(&problem);
  if (!state.board) {
    slot.record.status = RankStatus::NoBoard;
    CAR_WARN(state.device, "{}: {}; all-reduces go to NCCL", describe(state), problem);
    slot.warned = true;
    return false;
  }
  slot.record.boardId = state.board->id();
  return true;
}

// The engine (our buffer block and its IPC handle, in the record). Status NoBuffers when
// it cannot be made or exported.
void createEngine(Slot& slot) {
  CommState& state = *slot.state;
  HandshakeRecord& record = slot.record;
  EngineOptions options;
  options.device = state.device;
  options.rank = state.rank;
  options.ranks = state.ranks;
  options.config = shimConfig();
  std::unique_ptr<RankEngine> engine;
  cudaError_t err = faultActive(Fault::NoBuffers) ? cudaErrorMemoryAllocation : RankEngine::create(options, &engine);
  if (err == cudaSuccess) err = engine->block().exportHandle(&record.handle);
  if (err != cudaSuccess) {
    cudaGetLastError();
    engine.reset();  // never exported, or nobody got its handle: freed at once
    record.status = RankStatus::NoBuffers;
    CAR_WARN(state.device, "{}: cannot allocate or export our buffers ({}); all-reduces go to NCCL",
             describe(state), cudaGetErrorString(err));
    slot.warned = true;
    return;
  }
  record.blockAddress = reinterpret_cast<std::uint64_t>(engine->block().base());
  state.setEngine(std::move(engine));
}

// Everything before the first exchange. A failure after the scratch exists still takes
// part (the record's status says so), so the peers are not left waiting.
void prepare(const RealNccl& real, Slot& slot) {
  if (!learnCommunicator(real, slot)) return;
  DeviceGuard guard(slot.state->device);  // what follows runs on the communicator's device
  if (!openHandshake(slot, guard)) return;
  slot.inHandshake = true;
  fillRecord(slot);
  if (createBoard(slot)) createEngine(slot);
}

// Tries to reach every peer, if the records allow it, and writes our link report.
void mapPeers(Slot& slot) {
  CommState& state = *slot.state;
  LinkReport& report = slot.report;
  report.magic = kHandshakeMagic;
  if (!slot.failure.empty()) {
    copyText(report.problem, sizeof(report.problem), slot.failure);
    return;
  }
  slot.verdict = judgeRecords(slot.records);
  if (!slot.verdict.eligible) return;
  std::string problem;
  if (!state.peers.mapAll(slot.records, state.rank, state.device, state.engine->block().base(), &slot.bases,
                          &problem)) {
    copyText(report.problem, sizeof(report.problem), problem);
    return;
  }
  report.mapped = 1;
  DeviceGuard guard(state.device);
  for (int p = 0; p < state.ranks; ++p) {
    const PairLink link = p == state.rank ? PairLink{true, true}
                                          : linkBetween(state.device, fieldText(slot.record.busId),
                                                        fieldText(slot.records[p].busId));
    report.p2pMask |= static_cast<std::uint32_t>(link.p2p) << p;
    report.nvlinkMask |= static_cast<std::uint32_t>(link.nvlink) << p;
  }
  report.nvmlMissing = nvmlAvailable() ? 0 : 1;
}

void conclude(Slot& slot) {
  CommState& state = *slot.state;
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.phase == CommPhase::Released) {
    // Destroyed or aborted while we were setting it up: nothing of ours ran on it, but
    // peers may have mapped our block.
    letGoOfBuffers(state, state.takeEngine());
    CAR_INFO(state.device, "{} released during set-up", describe(state));
    return;
  }
  if (state.phase != CommPhase::Pending) return;
  Verdict verdict;
  if (state.stopRequested.load()) {
    verdict.reason = "revoked or shrunk with NCCL_SHRINK_ABORT during set-up";
  } else if (!slot.failure.empty()) {
    verdict.reason = slot.failure;
    verdict.unexpected = state.ranks >= 2 && state.ranks <= kMaxRanks;  // else simply not our size
  } else {
    verdict = judgeLinks(slot.records, slot.reports);
  }
  if (verdict.eligible) {
    state.engine->attachPeers(slot.bases.data(), verdict.fullNvlink, verdict.computeCapability);
    state.phase = CommPhase::Ready;
    CAR_INFO(state.device, "{}", logText(formatSetupEligible, describe(state).c_str(), verdict.allSameProcess,
                                         verdict.fullNvlink, verdict.computeCapability, shimConfig().maxBytes));
    return;
  }
  letGoOfBuffers(state, state.takeEngine());
  state.phase = CommPhase::Ineligible;
  state.reason = verdict.reason;
  if (verdict.differingVariable != nullptr) {
    CAR_WARN(state.device, "{}: {}; set it the same on every rank. All-reduces go to NCCL.", describe(state),
             verdict.reason);
  } else if (verdict.unexpected && !slot.warned) {
    CAR_WARN(state.device, "{}: {}. All-reduces go to NCCL.", describe(state), verdict.reason);
  }
  CAR_INFO(state.device, "{}", logText(formatSetupNotEligible, describe(state).c_str(), verdict.reason.c_str()));
}

}  // namespace

void runHandshakes(const RealNccl& real, const std::vector<std::shared_ptr<CommState>>& states) {
  std::vector<Slot> slots(states.size());
  bool anyInHandshake = false;
  for (std::size_t i = 0; i < states.size(); ++i) {
    slots[i].state = states[i];
    prepare(real, slots[i]);
    anyInHandshake = anyInHandshake || slots[i].inHandshake;
  }
  if (anyInHandshake) {  // e.g. only 1-rank communicators: no collective at all
    exchangeRecords(real, cudaHandshakeDevice(), slots);
    for (Slot& slot : slots) {
      if (slot.inHandshake) mapPeers(slot);
    }
    exchangeReports(real, cudaHandshakeDevice(), slots);
  }
  for (Slot& slot : slots) {
    conclude(slot);
    if (slot.stream == nullptr) continue;
    DeviceGuard guard(slot.state->device);
    // An all-gather NCCL did not stop may still write the scratch: it is never reused.
    if (slot.scratch != nullptr && !slot.deviceBusy) returnScratch(slot.state->device, slot.scratch);
    // Returns at once; CUDA frees the stream when its work is done.
    CAR_CUDA_RELEASE(slot.state->device, cudaStreamDestroy(slot.stream));
  }
}

}  // namespace car
