#include "handshake/handshake_exchange.h"

namespace car {
namespace {

GatherArea areaOf(const ExchangeMember& member) { return ScratchLayout::forRanks(member.state->ranks()).records; }

// Our record into the scratch, the receive area zeroed, and the gate entered (held from the
// all-gather to the group's end: an abort waits for that, then no call of ours on the
// communicator follows). Returns whether it is to be issued.
bool stageAndEnter(HandshakeDevice& device, ExchangeMember& member, const JoinedCall* joined) {
  const GatherArea area = areaOf(member);
  if (!device.stage(member, area.send, &member.record, sizeof(HandshakeRecord), area.receive,
                    area.receiveBytes(member.state->ranks()))) {
    // Still issued: its peers are not left waiting; what it gathers is not trusted.
    member.failure = "cannot stage the set-up's exchange";
  }
  if (joined != nullptr && joined->gateHeld == member.state.get()) return true;
  if (member.state->gate().enter()) return true;
  member.failure = kStoppedDuringSetup;
  return false;
}

void leaveGate(ExchangeMember& member, const JoinedCall* joined) {
  if (joined == nullptr || joined->gateHeld != member.state.get()) member.state->gate().leave();
}

}  // namespace

ncclResult_t issueExchange(const RealNccl& real, HandshakeDevice& device, const std::vector<ExchangeMember*>& members,
                           JoinedCall* joined) {
  std::vector<ExchangeMember*> issuing;
  for (ExchangeMember* member : members) {
    if (stageAndEnter(device, *member, joined)) issuing.push_back(member);
  }
  if (issuing.empty() && joined == nullptr) return ncclSuccess;
  const ncclResult_t started = real.groupStart();
  if (started == ncclSuccess) {
    for (ExchangeMember* member : issuing) {
      const GatherArea area = areaOf(*member);
      const ncclResult_t issued = real.allGather(member->scratch + area.send, member->scratch + area.receive,
                                                 sizeof(HandshakeRecord), ncclUint8, member->state->comm(),
                                                 member->stream);
      if (issued == ncclSuccess || issued == ncclInProgress) {
        member->issued = true;
      } else {
        member->failure = std::string("the set-up's all-gather failed: ") + real.getErrorString(issued);
      }
    }
    if (joined != nullptr) joined->result = joined->issue();
  } else {
    for (ExchangeMember* member : issuing) {
      member->failure = std::string("the set-up's group could not start: ") + real.getErrorString(started);
    }
    if (joined != nullptr) joined->result = joined->issue();  // the caller's call goes to NCCL all the same
  }
  const ncclResult_t ended = started == ncclSuccess ? real.groupEnd() : started;
  if (joined != nullptr) joined->ended = started == ncclSuccess ? ended : ncclSuccess;  // else it went alone
  for (ExchangeMember* member : issuing) leaveGate(*member, joined);
  for (ExchangeMember* member : issuing) {
    if (!member->issued) continue;
    if (ended != ncclSuccess && ended != ncclInProgress) {
      // NCCL gave the group up; what it left on the stream, or still refers to, is not known
      // (a connection to a dead peer failed inside it): the scratch and the stream are kept.
      member->issued = false;
      member->deviceBusy = true;
      member->failure = std::string("the set-up's group failed: ") + real.getErrorString(ended);
      continue;
    }
    // Blocking: on the stream now. Nonblocking: NCCL's own thread launches it later.
    member->launched = !member->state->nonblocking();
    member->deviceBusy = true;  // until the all-gather is known to have completed
  }
  return ended;
}

ExchangeProgress pollExchange(const RealNccl& real, HandshakeDevice& device, ExchangeMember& member) {
  if (!member.issued) return ExchangeProgress::Failed;
  if (!member.launched) {
    ncclResult_t async = ncclInProgress;
    ncclResult_t query = ncclSuccess;
    switch (member.state->gate().tryPass([&] { query = real.commGetAsyncError(member.state->comm(), &async); })) {
      case NcclGate::Attempt::Busy: return ExchangeProgress::Pending;  // a call of the program's is inside NCCL
      case NcclGate::Attempt::Closed: member.failure = kStoppedDuringSetup; return ExchangeProgress::Failed;
      case NcclGate::Attempt::Ran: break;
    }
    if (query == ncclSuccess && async == ncclInProgress) return ExchangeProgress::Pending;
    if (query != ncclSuccess || async != ncclSuccess) {
      // NCCL's thread gave the group up (or the communicator broke): whether it reached the
      // stream is not known, so the scratch and the stream stay lost (deviceBusy).
      member.failure =
          std::string("the set-up's all-gather failed: ") + real.getErrorString(query != ncclSuccess ? query : async);
      return ExchangeProgress::Failed;
    }
    // NCCL answers success only once the group is on the streams; a later call of the
    // program's can only have come after that.
    member.launched = true;
  }
  switch (device.query(member)) {
    case HandshakeDevice::StreamState::Busy:
      if (!member.state->gate().closed()) return ExchangeProgress::Pending;
      member.failure = kStoppedDuringSetup;
      return ExchangeProgress::Failed;
    case HandshakeDevice::StreamState::Failed:
      member.failure = "the set-up's stream failed";
      return ExchangeProgress::Failed;
    case HandshakeDevice::StreamState::Idle: break;
  }
  member.deviceBusy = false;
  const GatherArea area = areaOf(member);
  const int ranks = member.state->ranks();
  member.records.assign(static_cast<std::size_t>(ranks), HandshakeRecord{});
  if (!device.readBack(member, area.receive, member.records.data(), area.receiveBytes(ranks))) {
    member.failure = "cannot read the set-up's exchange back";
    return ExchangeProgress::Failed;
  }
  if (!member.failure.empty()) return ExchangeProgress::Failed;  // staged wrong: its own record is not trusted
  return ExchangeProgress::Done;
}

}  // namespace car
