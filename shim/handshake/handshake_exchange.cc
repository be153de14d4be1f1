#include "handshake/handshake_exchange.h"

#include <chrono>
#include <thread>

namespace car {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A slot's part in one all-gather: where in its scratch, the item it sends, and where every
// rank's item goes once all have arrived.
template <typename T>
struct GatherPart {
  GatherArea area;
  const T* mine = nullptr;
  std::vector<T>* everyone = nullptr;
};

GatherPart<HandshakeRecord> recordsPart(Slot& slot) {
  return {ScratchLayout::forRanks(slot.state->ranks).records, &slot.record, &slot.records};
}

GatherPart<LinkReport> reportsPart(Slot& slot) {
  return {ScratchLayout::forRanks(slot.state->ranks).reports, &slot.report, &slot.reports};
}

// Waits for the slot's stream (the all-gather). An abort ends the wait once NCCL stopped
// its kernel, or, after the limit, with the scratch given up for lost.
bool waitForStream(HandshakeDevice& device, Slot& slot, const ExchangeLimits& limits) {
  double stoppedAt = -1;
  while (true) {
    const HandshakeDevice::StreamState stream = device.query(slot);
    if (stream == HandshakeDevice::StreamState::Failed) {
      slot.failure = "the handshake's stream failed";
      return false;
    }
    if (stream == HandshakeDevice::StreamState::Idle) break;
    if (slot.state->gate.closed()) {
      if (stoppedAt < 0) stoppedAt = now();
      if (now() - stoppedAt > limits.drainAfterStopSeconds) {
        slot.deviceBusy = true;
        slot.failure = kStoppedDuringSetup;
        return false;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (slot.state->gate.closed()) {
    slot.failure = kStoppedDuringSetup;
    return false;
  }
  return true;
}

// After the group: a nonblocking communicator's all-gather is only issued once NCCL stops
// answering ncclInProgress; its answer then must be success.
bool collectiveIssued(const RealNccl& real, Slot& slot) {
  if (!slot.state->nonblocking) return true;
  ncclResult_t async = ncclInProgress;
  ncclResult_t query = ncclSuccess;
  while (true) {
    if (!slot.state->gate.pass([&] { query = real.commGetAsyncError(slot.state->comm, &async); })) {
      slot.failure = kStoppedDuringSetup;
      return false;
    }
    if (query != ncclSuccess || async != ncclInProgress) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (query != ncclSuccess || async != ncclSuccess) {
    slot.failure = std::string("handshake all-gather failed: ") + real.getErrorString(query != ncclSuccess ? query : async);
    return false;
  }
  return true;
}

// Step 1, per slot in the handshake: our item into the scratch, the receive area zeroed,
// and the gate entered (held from the first all-gather to the group's end: an abort waits
// for that, then no call of ours on the communicator follows). Returns the slots that got
// in; a slot whose staging failed still takes part, so that its peers are not left waiting.
template <typename T>
std::vector<Slot*> stageAndEnter(HandshakeDevice& device, std::vector<Slot>& slots, GatherPart<T> (*partOf)(Slot&)) {
  std::vector<Slot*> issuing;
  for (Slot& slot : slots) {
    if (!slot.inHandshake) continue;
    const GatherPart<T> part = partOf(slot);
    if (!device.stage(slot, part.area.send, part.mine, sizeof(T), part.area.receive,
                      part.area.receiveBytes(slot.state->ranks))) {
      slot.failure = "cannot stage the handshake";
    }
    if (slot.state->gate.enter()) {
      issuing.push_back(&slot);
    } else {
      slot.failure = kStoppedDuringSetup;
    }
  }
  return issuing;
}

// Step 2: every entered slot's all-gather in one NCCL group; the gates are left after the
// group's end. Returns what ended the group.
template <typename T>
ncclResult_t allGatherInOneGroup(const RealNccl& real, const std::vector<Slot*>& issuing,
                                 GatherPart<T> (*partOf)(Slot&)) {
  if (issuing.empty()) return ncclSuccess;
  const ncclResult_t started = real.groupStart();
  for (Slot* slot : issuing) {
    if (started != ncclSuccess) break;
    const GatherArea area = partOf(*slot).area;
    const ncclResult_t issued = real.allGather(slot->scratch + area.send, slot->scratch + area.receive, sizeof(T),
                                               ncclUint8, slot->state->comm, slot->stream);
    if (issued != ncclSuccess && issued != ncclInProgress) {
      slot->failure = std::string("handshake all-gather failed: ") + real.getErrorString(issued);
    }
  }
  const ncclResult_t ended = started == ncclSuccess ? real.groupEnd() : started;
  for (Slot* slot : issuing) slot->state->gate.leave();
  return ended;
}

// Step 3, per slot: whether its all-gather has completed, so its bytes can be read.
bool gathered(const RealNccl& real, HandshakeDevice& device, Slot& slot, ncclResult_t groupEnded,
              const ExchangeLimits& limits) {
  if (groupEnded != ncclSuccess && groupEnded != ncclInProgress) {
    slot.failure = std::string("handshake group failed: ") + real.getErrorString(groupEnded);
    return false;
  }
  return collectiveIssued(real, slot) && waitForStream(device, slot, limits);
}

// Step 4, per slot: every rank's item read back.
template <typename T>
void readBack(HandshakeDevice& device, Slot& slot, const GatherPart<T>& part) {
  const int ranks = slot.state->ranks;
  part.everyone->assign(ranks, T{});
  if (!device.readBack(slot, part.area.receive, part.everyone->data(), part.area.receiveBytes(ranks))) {
    slot.failure = "cannot read the handshake back";
  }
}

template <typename T>
void exchange(const RealNccl& real, HandshakeDevice& device, std::vector<Slot>& slots, GatherPart<T> (*partOf)(Slot&),
              const ExchangeLimits& limits) {
  const std::vector<Slot*> issuing = stageAndEnter(device, slots, partOf);
  const ncclResult_t ended = allGatherInOneGroup(real, issuing, partOf);
  for (Slot* slot : issuing) {
    if (gathered(real, device, *slot, ended, limits)) readBack(device, *slot, partOf(*slot));
  }
}

}  // namespace

void exchangeRecords(const RealNccl& real, HandshakeDevice& device, std::vector<Slot>& slots,
                     const ExchangeLimits& limits) {
  exchange(real, device, slots, &recordsPart, limits);
}

void exchangeReports(const RealNccl& real, HandshakeDevice& device, std::vector<Slot>& slots,
                     const ExchangeLimits& limits) {
  exchange(real, device, slots, &reportsPart, limits);
}

}  // namespace car
