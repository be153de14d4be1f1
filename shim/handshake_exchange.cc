#include "handshake_exchange.h"

#include <chrono>
#include <thread>

namespace car {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

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

template <typename T>
void exchange(const RealNccl& real, HandshakeDevice& device, std::vector<Slot>& slots, T Slot::*mine,
              std::vector<T> Slot::*all, std::size_t (*sendOffset)(int), std::size_t (*recvOffset)(int),
              const ExchangeLimits& limits) {
  std::vector<Slot*> issuing;
  for (Slot& slot : slots) {
    if (!slot.inHandshake) continue;
    const int ranks = slot.state->ranks;
    if (!device.stage(slot, sendOffset(ranks), &(slot.*mine), sizeof(T), recvOffset(ranks), sizeof(T) * ranks)) {
      slot.failure = "cannot stage the handshake";
    }
    // Held from the first all-gather to the group's end: an abort waits for that, then no
    // call of ours on the communicator follows.
    if (slot.state->gate.enter()) {
      issuing.push_back(&slot);
    } else {
      slot.failure = kStoppedDuringSetup;
    }
  }
  // Every slot in the handshake takes part in the group, whatever failed before: the peers
  // must not be left waiting.
  ncclResult_t ended = ncclSuccess;
  if (!issuing.empty()) {
    const ncclResult_t started = real.groupStart();
    for (Slot* slot : issuing) {
      if (started != ncclSuccess) break;
      const int ranks = slot->state->ranks;
      const ncclResult_t issued = real.allGather(slot->scratch + sendOffset(ranks), slot->scratch + recvOffset(ranks),
                                                 sizeof(T), ncclUint8, slot->state->comm, slot->stream);
      if (issued != ncclSuccess && issued != ncclInProgress) {
        slot->failure = std::string("handshake all-gather failed: ") + real.getErrorString(issued);
      }
    }
    ended = started == ncclSuccess ? real.groupEnd() : started;
    for (Slot* slot : issuing) slot->state->gate.leave();
  }
  for (Slot* slot : issuing) {
    if (ended != ncclSuccess && ended != ncclInProgress) {
      slot->failure = std::string("handshake group failed: ") + real.getErrorString(ended);
      continue;
    }
    if (!collectiveIssued(real, *slot) || !waitForStream(device, *slot, limits)) continue;
    const int ranks = slot->state->ranks;
    (slot->*all).assign(ranks, T{});
    if (!device.readBack(*slot, recvOffset(ranks), (slot->*all).data(), sizeof(T) * ranks)) {
      slot->failure = "cannot read the handshake back";
    }
  }
}

std::size_t zero(int) { return 0; }

}  // namespace

std::size_t recordsOffset(int) { return sizeof(HandshakeRecord); }
std::size_t reportOffset(int ranks) { return sizeof(HandshakeRecord) * (ranks + 1); }
std::size_t reportsOffset(int ranks) { return reportOffset(ranks) + sizeof(LinkReport); }
std::size_t scratchBytes(int ranks) { return reportsOffset(ranks) + sizeof(LinkReport) * ranks; }

void exchangeRecords(const RealNccl& real, HandshakeDevice& device, std::vector<Slot>& slots,
                     const ExchangeLimits& limits) {
  exchange(real, device, slots, &Slot::record, &Slot::records, &zero, &recordsOffset, limits);
}

void exchangeReports(const RealNccl& real, HandshakeDevice& device, std::vector<Slot>& slots,
                     const ExchangeLimits& limits) {
  exchange(real, device, slots, &Slot::report, &Slot::reports, &reportOffset, &reportsOffset, limits);
}

}  // namespace car
