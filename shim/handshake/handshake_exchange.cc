#include "handshake/handshake_exchange.h"

#include <algorithm>

namespace car {
namespace {

GatherArea areaOf(const ExchangeMember& member) { return ScratchLayout::forRanks(member.comm->ranks()).records; }

// Our record into the scratch, the receive area zeroed, and the gate entered (held from the
// all-gather to the group's end: an abort waits for that, then no call of ours on the
// communicator follows). Returns whether it is to be issued.
bool stageAndEnter(HandshakeDevice& device, ExchangeMember& member, const JoinedCall* joined) {
  const GatherArea area = areaOf(member);
  if (!device.stage(member, area.send, &member.record, sizeof(HandshakeRecord), area.receive,
                    area.receiveBytes(member.comm->ranks()))) {
    // Still issued: its peers are not left waiting; what it gathers is not trusted.
    member.failure = "cannot stage the set-up's exchange";
  }
  if (joined != nullptr && joined->gateHeld == member.comm.get()) return true;
  if (member.comm->gate().enter()) return true;
  member.failure = kStoppedDuringSetup;
  return false;
}

void leaveGate(ExchangeMember& member, const JoinedCall* joined) {
  if (joined == nullptr || joined->gateHeld != member.comm.get()) member.comm->gate().leave();
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
                                                 sizeof(HandshakeRecord), ncclUint8, member->comm->comm(),
                                                 member->stream);
      // Refused (a nonblocking communicator still in progress, say): the group's end fails
      // too, and nothing of it reaches NCCL's sequence.
      if (issued == ncclSuccess || issued == ncclInProgress) member->issued = true;
      else member->refused = true;
    }
    // NCCL runs none of a group one of whose calls it refused: its other members' all-gathers
    // never entered their sequences either, so they are refused with it (back to Pending).
    const bool anyRefused = std::any_of(issuing.begin(), issuing.end(), [](const ExchangeMember* member) { return member->refused; });
    if (anyRefused) {
      for (ExchangeMember* member : issuing) {
        member->issued = false;
        member->refused = true;
      }
    }
    if (joined != nullptr) joined->result = joined->issue();
  } else {
    for (ExchangeMember* member : issuing) member->refused = true;
    if (joined != nullptr) joined->result = joined->issue();  // the caller's call goes to NCCL all the same
  }
  const ncclResult_t ended = started == ncclSuccess ? real.groupEnd() : started;
  if (joined != nullptr) joined->ended = started == ncclSuccess ? ended : ncclSuccess;  // else it went alone
  for (ExchangeMember* member : issuing) leaveGate(*member, joined);
  for (ExchangeMember* member : issuing) {
    if (!member->issued) continue;
    if (ended != ncclSuccess && ended != ncclInProgress) {
      // NCCL took our all-gather, then gave the group up at its end (a connection to a dead
      // peer failed inside it): the communicator is broken, not merely early. What NCCL left
      // on the stream, or still refers to, is not known: the scratch and the stream are kept.
      member->issued = false;
      member->deviceBusy = true;
      member->failure = std::string("the set-up's group failed: ") + real.getErrorString(ended);
      continue;
    }
    // Ended: on the stream now. In progress: NCCL's own thread launches it later.
    member->launched = ended == ncclSuccess;
    member->acceptedAtIssue = member->comm->ncclAccepted();
    member->deviceBusy = true;  // until the all-gather is known to have completed
  }
  return ended;
}

ExchangeProgress pollExchange(HandshakeDevice& device, ExchangeMember& member) {
  if (!member.issued) return ExchangeProgress::Failed;
  if (!member.launched) {
    // NCCL refuses every call on a nonblocking communicator until its thread has launched the
    // group: one it accepted since is proof. A program that never calls again leaves the
    // set-up to its bound.
    if (member.comm->ncclAccepted() == member.acceptedAtIssue) {
      if (!member.comm->gate().closed()) return ExchangeProgress::Pending;
      member.failure = kStoppedDuringSetup;
      return ExchangeProgress::Failed;
    }
    member.launched = true;
  }
  switch (device.query(member)) {
    case HandshakeDevice::StreamState::Busy:
      if (!member.comm->gate().closed()) return ExchangeProgress::Pending;
      member.failure = kStoppedDuringSetup;
      return ExchangeProgress::Failed;
    case HandshakeDevice::StreamState::Failed:
      member.failure = "the set-up's stream failed";
      return ExchangeProgress::Failed;
    case HandshakeDevice::StreamState::Idle: break;
  }
  member.deviceBusy = false;
  const GatherArea area = areaOf(member);
  const int ranks = member.comm->ranks();
  member.records.assign(static_cast<std::size_t>(ranks), HandshakeRecord{});
  if (!device.readBack(member, area.receive, member.records.data(), area.receiveBytes(ranks))) {
    member.failure = "cannot read the set-up's exchange back";
    return ExchangeProgress::Failed;
  }
  if (!member.failure.empty()) return ExchangeProgress::Failed;  // staged wrong: its own record is not trusted
  return ExchangeProgress::Done;
}

}  // namespace car
