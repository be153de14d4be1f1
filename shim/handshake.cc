#include "handshake.h"

#include <cstring>
#include <thread>

#include "device_guard.h"
#include "fault_injection.h"
#include "host_identity.h"
#include "log.h"
#include "p2p_limit.h"
#include "shim_config.h"
#include "topology.h"
#include "verdict.h"

namespace car {
namespace {

// One communicator's part of the batch: device scratch for both all-gathers
// ([record | records x n | report | reports x n]) and a private stream.
struct Slot {
  std::shared_ptr<CommState> state;
  cudaStream_t stream = nullptr;
  char* scratch = nullptr;
  bool inHandshake = false;  // issued the collectives; false if it failed before
  std::string failure;       // why it could not take part, or why a collective failed
  bool warned = false;       // this rank already WARNed about its own failure
  HandshakeRecord record{};
  std::vector<HandshakeRecord> records;
  LinkReport report{};
  std::vector<LinkReport> reports;
  std::vector<void*> bases;
  Verdict verdict;
};

std::size_t recordsOffset() { return sizeof(HandshakeRecord); }
std::size_t reportOffset(int ranks) { return sizeof(HandshakeRecord) * (ranks + 1); }
std::size_t reportsOffset(int ranks) { return reportOffset(ranks) + sizeof(LinkReport); }
std::size_t scratchBytes(int ranks) { return reportsOffset(ranks) + sizeof(LinkReport) * ranks; }

void copyText(char* field, std::size_t size, const std::string& value) {
  std::strncpy(field, value.c_str(), size - 1);
  field[size - 1] = '\0';
}

// Learns rank, size and device, allocates the buffer block and the handshake scratch, and
// fills our record. A failure after the scratch exists still takes part (status says so),
// so the peers are not left waiting in the all-gather.
void prepare(const RealNccl& real, Slot& slot) {
  CommState& state = *slot.state;
  if (real.commUserRank(state.comm, &state.rank) != ncclSuccess ||
      real.commCount(state.comm, &state.ranks) != ncclSuccess ||
      real.commCuDevice(state.comm, &state.device) != ncclSuccess) {
    slot.failure = "cannot query the real communicator";
    return;
  }
  if (state.ranks < 2 || state.ranks > kMaxRanks) {
    // Every rank sees the same count, so every rank skips the handshake alike.
    slot.failure = fmt::format("{} ranks (we take 2 to {})", state.ranks, kMaxRanks);
    return;
  }
  DeviceGuard guard(state.device);
  if (guard.error() != cudaSuccess ||
      cudaStreamCreateWithFlags(&slot.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&slot.scratch), scratchBytes(state.ranks)) != cudaSuccess) {
    cudaGetLastError();
    slot.failure = "CUDA unusable for the handshake";
    CAR_WARN(state.device, "{}: {}; the peers' handshake cannot complete. All-reduces go to NCCL.",
             describe(state), slot.failure);
    slot.warned = true;
    return;
  }
  slot.inHandshake = true;

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

  EngineOptions options;
  options.device = state.device;
  options.rank = state.rank;
  options.ranks = state.ranks;
  options.config = shimConfig();
  cudaError_t err = faultActive(Fault::NoBuffers) ? cudaErrorMemoryAllocation
                                                  : RankEngine::create(options, &state.engine);
  if (err == cudaSuccess) err = state.engine->block().exportHandle(&record.handle);
  if (err != cudaSuccess) {
    cudaGetLastError();
    state.engine.reset();
    record.status = RankStatus::NoBuffers;
    CAR_WARN(state.device, "{}: cannot allocate or export our buffers ({}); all-reduces go to NCCL",
             describe(state), cudaGetErrorString(err));
    slot.warned = true;
  } else {
    record.blockAddress = reinterpret_cast<std::uint64_t>(state.engine->block().base());
  }
}

// All-gathers `mine` (at scratch + sendOffset) into scratch + recvOffset for every slot,
// in one group, and copies the result into *all.
template <typename T>
void exchange(const RealNccl& real, std::vector<Slot>& slots, T Slot::*mine, std::vector<T> Slot::*all,
              std::size_t (*sendOffset)(int), std::size_t (*recvOffset)(int)) {
  for (Slot& slot : slots) {
    if (!slot.inHandshake) continue;
    DeviceGuard guard(slot.state->device);
    // On the handshake's own non-blocking stream: a plain cudaMemcpy would also wait for
    // the caller's blocking streams, where one of our kernels may wait for this very peer.
    if (cudaMemcpyAsync(slot.scratch + sendOffset(slot.state->ranks), &(slot.*mine), sizeof(T),
                        cudaMemcpyHostToDevice, slot.stream) != cudaSuccess ||
        cudaStreamSynchronize(slot.stream) != cudaSuccess) {
      slot.failure = "cannot stage the handshake";
    }
  }
  ncclResult_t result = real.groupStart();
  for (Slot& slot : slots) {
    if (!slot.inHandshake || result != ncclSuccess) continue;
    DeviceGuard guard(slot.state->device);
    const ncclResult_t issued =
        real.allGather(slot.scratch + sendOffset(slot.state->ranks), slot.scratch + recvOffset(slot.state->ranks),
                       sizeof(T), ncclUint8, slot.state->comm, slot.stream);
    if (issued != ncclSuccess && issued != ncclInProgress) {
      slot.failure = std::string("handshake all-gather failed: ") + real.getErrorString(issued);
    }
  }
  const ncclResult_t ended = real.groupEnd();
  for (Slot& slot : slots) {
    if (!slot.inHandshake) continue;
    if (ended != ncclSuccess && ended != ncclInProgress) {
      slot.failure = std::string("handshake group failed: ") + real.getErrorString(ended);
      continue;
    }
    ncclResult_t async = ncclInProgress;
    while (slot.state->nonblocking && real.commGetAsyncError(slot.state->comm, &async) == ncclSuccess &&
           async == ncclInProgress) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    DeviceGuard guard(slot.state->device);
    (slot.*all).resize(slot.state->ranks);
    if (cudaStreamSynchronize(slot.stream) != cudaSuccess ||
        cudaMemcpyAsync((slot.*all).data(), slot.scratch + recvOffset(slot.state->ranks),
                        sizeof(T) * slot.state->ranks, cudaMemcpyDeviceToHost, slot.stream) != cudaSuccess ||
        cudaStreamSynchronize(slot.stream) != cudaSuccess) {
      cudaGetLastError();
      slot.failure = "cannot read the handshake back";
    }
  }
}

std::size_t zero(int) { return 0; }
std::size_t recordsAt(int) { return recordsOffset(); }

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
    // Destroyed or aborted while we were setting it up: nothing of ours ran on it.
    state.peers.unmapAll();
    state.engine.reset();
    CAR_INFO(state.device, "{} released during set-up", describe(state));
    return;
  }
  if (state.phase != CommPhase::Pending) return;
  Verdict verdict;
  if (!slot.failure.empty()) {
    verdict.reason = slot.failure;
    verdict.unexpected = state.ranks >= 2 && state.ranks <= kMaxRanks;  // else simply not our size
  } else {
    verdict = judgeLinks(slot.records, slot.reports);
  }
  if (verdict.eligible) {
    state.engine->attachPeers(slot.bases.data(), verdict.fullNvlink, verdict.computeCapability);
    state.phase = CommPhase::Ready;
    CAR_INFO(state.device, "{} setup: eligible ({} peers, {}, sm_{}, up to {} bytes)", describe(state),
             verdict.allSameProcess ? "same-process" : "ipc", verdict.fullNvlink ? "full nvlink" : "no nvlink",
             verdict.computeCapability == 0 ? std::string("mixed") : std::to_string(verdict.computeCapability),
             shimConfig().maxBytes);
    return;
  }
  state.peers.unmapAll();
  state.engine.reset();
  state.phase = CommPhase::Ineligible;
  state.reason = verdict.reason;
  if (verdict.differingVariable != nullptr) {
    CAR_WARN(state.device, "{}: {}; set it the same on every rank. All-reduces go to NCCL.", describe(state),
             verdict.reason);
  } else if (verdict.unexpected && !slot.warned) {
    CAR_WARN(state.device, "{}: {}. All-reduces go to NCCL.", describe(state), verdict.reason);
  }
  CAR_INFO(state.device, "{} setup: not eligible: {}", describe(state), verdict.reason);
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
    exchange(real, slots, &Slot::record, &Slot::records, &zero, &recordsAt);
    for (Slot& slot : slots) {
      if (slot.inHandshake) mapPeers(slot);
    }
    exchange(real, slots, &Slot::report, &Slot::reports, &reportOffset, &reportsOffset);
  }
  for (Slot& slot : slots) {
    conclude(slot);
    if (slot.inHandshake) {
      DeviceGuard guard(slot.state->device);
      cudaFree(slot.scratch);
      cudaStreamDestroy(slot.stream);
    }
  }
}

}  // namespace car
