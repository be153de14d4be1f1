#include "handshake/handshake_exchange.h"

#include <chrono>
#include <thread>

namespace car {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// A member's part in one all-gather: where in its scratch, the item it sends, and where every
// rank's item goes once all have arrived.
template <typename T>
struct GatherPart {
  GatherArea area;
  const T* mine = nullptr;
  std::vector<T>* everyone = nullptr;
};

GatherPart<HandshakeRecord> recordsPart(BatchMember& member) {
  return {ScratchLayout::forRanks(member.state->ranks()).records, &member.record, &member.records};
}

GatherPart<LinkReport> reportsPart(BatchMember& member) {
  return {ScratchLayout::forRanks(member.state->ranks()).reports, &member.report, &member.reports};
}

// Waits for the member's stream (the all-gather). An abort ends the wait once NCCL stopped
// its kernel, or, after the limit, with the scratch given up for lost.
bool waitForStream(HandshakeDevice& device, BatchMember& member, const ExchangeLimits& limits) {
  double stoppedAt = -1;
  while (true) {
    const HandshakeDevice::StreamState stream = device.query(member);
    if (stream == HandshakeDevice::StreamState::Failed) {
      member.failure = "the handshake's stream failed";
      return false;
    }
    if (stream == HandshakeDevice::StreamState::Idle) break;
    if (member.state->gate().closed()) {
      if (stoppedAt < 0) stoppedAt = now();
      if (now() - stoppedAt > limits.drainAfterStopSeconds) {
        member.deviceBusy = true;
        member.failure = kStoppedDuringSetup;
        return false;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (member.state->gate().closed()) {
    member.failure = kStoppedDuringSetup;
    return false;
  }
  return true;
}

// After the group: a nonblocking communicator's all-gather is only issued once NCCL stops
// answering ncclInProgress; its answer then must be success.
bool collectiveIssued(const RealNccl& real, BatchMember& member) {
  if (!member.state->nonblocking()) return true;
  ncclResult_t async = ncclInProgress;
  ncclResult_t query = ncclSuccess;
  while (true) {
    if (!member.state->gate().pass([&] { query = real.commGetAsyncError(member.state->comm(), &async); })) {
      member.failure = kStoppedDuringSetup;
      return false;
    }
    if (query != ncclSuccess || async != ncclInProgress) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (query != ncclSuccess || async != ncclSuccess) {
    member.failure =
        std::string("handshake all-gather failed: ") + real.getErrorString(query != ncclSuccess ? query : async);
    return false;
  }
  return true;
}

// Step 1, per member in the handshake: our item into the scratch, the receive area zeroed,
// and the gate entered (held from the first all-gather to the group's end: an abort waits
// for that, then no call of ours on the communicator follows). Returns the members that got
// in; a member whose staging failed still takes part, so that its peers are not left waiting.
template <typename T>
std::vector<BatchMember*> stageAndEnter(HandshakeDevice& device, std::vector<BatchMember>& members,
                                        GatherPart<T> (*partOf)(BatchMember&)) {
  std::vector<BatchMember*> issuing;
  for (BatchMember& member : members) {
    if (!member.inHandshake) continue;
    const GatherPart<T> part = partOf(member);
    if (!device.stage(member, part.area.send, part.mine, sizeof(T), part.area.receive,
                      part.area.receiveBytes(member.state->ranks()))) {
      member.failure = "cannot stage the handshake";
    }
    if (member.state->gate().enter()) {
      issuing.push_back(&member);
    } else {
      member.failure = kStoppedDuringSetup;
    }
  }
  return issuing;
}

// Step 2: every entered member's all-gather in one NCCL group; the gates are left after the
// group's end. Returns what ended the group.
template <typename T>
ncclResult_t allGatherInOneGroup(const RealNccl& real, const std::vector<BatchMember*>& issuing,
                                 GatherPart<T> (*partOf)(BatchMember&)) {
  if (issuing.empty()) return ncclSuccess;
  const ncclResult_t started = real.groupStart();
  for (BatchMember* member : issuing) {
    if (started != ncclSuccess) break;
    const GatherArea area = partOf(*member).area;
    const ncclResult_t issued = real.allGather(member->scratch + area.send, member->scratch + area.receive, sizeof(T),
                                               ncclUint8, member->state->comm(), member->stream);
    if (issued != ncclSuccess && issued != ncclInProgress) {
      member->failure = std::string("handshake all-gather failed: ") + real.getErrorString(issued);
    }
  }
  const ncclResult_t ended = started == ncclSuccess ? real.groupEnd() : started;
  for (BatchMember* member : issuing) member->state->gate().leave();
  return ended;
}

// Step 3, per member: whether its all-gather has completed, so its bytes can be read.
bool gathered(const RealNccl& real, HandshakeDevice& device, BatchMember& member, ncclResult_t groupEnded,
              const ExchangeLimits& limits) {
  if (groupEnded != ncclSuccess && groupEnded != ncclInProgress) {
    member.failure = std::string("handshake group failed: ") + real.getErrorString(groupEnded);
    return false;
  }
  return collectiveIssued(real, member) && waitForStream(device, member, limits);
}

// Step 4, per member: every rank's item read back.
template <typename T>
void readBack(HandshakeDevice& device, BatchMember& member, const GatherPart<T>& part) {
  const int ranks = member.state->ranks();
  part.everyone->assign(ranks, T{});
  if (!device.readBack(member, part.area.receive, part.everyone->data(), part.area.receiveBytes(ranks))) {
    member.failure = "cannot read the handshake back";
  }
}

template <typename T>
void exchange(const RealNccl& real, HandshakeDevice& device, std::vector<BatchMember>& members,
              GatherPart<T> (*partOf)(BatchMember&), const ExchangeLimits& limits) {
  const std::vector<BatchMember*> issuing = stageAndEnter(device, members, partOf);
  const ncclResult_t ended = allGatherInOneGroup(real, issuing, partOf);
  for (BatchMember* member : issuing) {
    if (gathered(real, device, *member, ended, limits)) readBack(device, *member, partOf(*member));
  }
}

}  // namespace

void exchangeRecords(const RealNccl& real, HandshakeDevice& device, std::vector<BatchMember>& members,
                     const ExchangeLimits& limits) {
  exchange(real, device, members, &recordsPart, limits);
}

void exchangeReports(const RealNccl& real, HandshakeDevice& device, std::vector<BatchMember>& members,
                     const ExchangeLimits& limits) {
  exchange(real, device, members, &reportsPart, limits);
}

}  // namespace car
