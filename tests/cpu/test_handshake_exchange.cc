// The set-up's one exchange (shim/handshake/handshake_exchange.h) against a fake NCCL and a host
// "device": one group for a batch (and the caller's own call in it), what is read back, NCCL's
// own errors, and that nothing ever waits for a peer: issuing returns at once, polling says
// "pending" until the all-gather has completed.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "handshake/handshake_exchange.h"

using namespace car;

namespace {

using Clock = std::chrono::steady_clock;

// What the fake NCCL does; reset by each test.
struct FakeNccl {
  bool writeResults = true;                // the all-gather fills every rank's record
  ncclResult_t groupEndResult = ncclSuccess;
  ncclResult_t allGatherResult = ncclSuccess;
  int refuseAllGather = 0;                 // this all-gather (1 = the first) is refused alone
  std::vector<ncclResult_t> asyncAnswers;  // ncclCommGetAsyncError, in turn; the last repeats
  std::size_t asyncCalls = 0;
  int depth = 0;
  int groups = 0;
  int allGathers = 0;
  std::vector<std::string> calls;          // "start", "all-gather", "joined", "end", in order
  std::mutex mutex;
};
FakeNccl gNccl;

void noteCall(const char* what) {
  std::lock_guard<std::mutex> lock(gNccl.mutex);
  gNccl.calls.push_back(what);
}

ncclResult_t fakeGroupStart() {
  noteCall("start");
  ++gNccl.depth;
  return ncclSuccess;
}
ncclResult_t fakeGroupEnd() {
  noteCall("end");
  --gNccl.depth;
  ++gNccl.groups;
  return gNccl.groupEndResult;
}
ncclResult_t fakeAllGather(const void* send, void* recv, size_t bytes, ncclDataType_t, ncclComm_t comm, cudaStream_t) {
  noteCall("all-gather");
  ++gNccl.allGathers;
  if (gNccl.allGatherResult != ncclSuccess) return gNccl.allGatherResult;
  if (gNccl.allGathers == gNccl.refuseAllGather) return ncclInvalidArgument;
  const int ranks = *reinterpret_cast<const int*>(&comm);  // the tests pass the rank count as the handle
  if (gNccl.writeResults) {
    for (int r = 0; r < ranks; ++r) std::memcpy(static_cast<char*>(recv) + r * bytes, send, bytes);
  }
  return ncclSuccess;
}
ncclResult_t fakeAsyncError(ncclComm_t, ncclResult_t* async) {
  std::lock_guard<std::mutex> lock(gNccl.mutex);
  const std::size_t turn = std::min(gNccl.asyncCalls++, gNccl.asyncAnswers.size() - 1);
  *async = gNccl.asyncAnswers[turn];
  return ncclSuccess;
}
const char* fakeErrorString(ncclResult_t result) { return result == ncclRemoteError ? "remote error" : "error"; }

RealNccl fakeTable() {
  RealNccl table{};
  table.groupStart = &fakeGroupStart;
  table.groupEnd = &fakeGroupEnd;
  table.allGather = &fakeAllGather;
  table.commGetAsyncError = &fakeAsyncError;
  table.getErrorString = &fakeErrorString;
  return table;
}

// Scratch in host memory; the stream is idle unless a test says otherwise.
class HostDevice final : public HandshakeDevice {
 public:
  bool stage(ExchangeMember& member, std::size_t offset, const void* data, std::size_t bytes, std::size_t clearOffset,
             std::size_t clearBytes) override {
    std::memcpy(member.scratch + offset, data, bytes);
    std::memset(member.scratch + clearOffset, 0, clearBytes);
    return true;
  }
  StreamState query(ExchangeMember&) override { return busy ? StreamState::Busy : StreamState::Idle; }
  bool readBack(ExchangeMember& member, std::size_t offset, void* out, std::size_t bytes) override {
    std::memcpy(out, member.scratch + offset, bytes);
    return true;
  }
  std::atomic<bool> busy{false};
};

struct Batch {
  std::vector<std::vector<char>> scratch;
  std::vector<ExchangeMember> members;
  Batch(int communicators, int ranks, bool nonblocking) {
    scratch.assign(communicators, std::vector<char>(ScratchLayout::forRanks(kMaxRanks).bytes));
    members.resize(communicators);
    for (int i = 0; i < communicators; ++i) {
      ExchangeMember& member = members[i];
      ncclComm_t comm = nullptr;
      std::memcpy(&comm, &ranks, sizeof(ranks));
      member.comm = std::make_shared<Communicator>(comm, nonblocking);
      member.comm->learnIdentity(0, ranks, 0);
      member.scratch = scratch[i].data();
      member.record.magic = kHandshakeMagic;
      member.record.rank = i;
      member.record.ranks = ranks;
      member.record.pid = 4000 + i;
    }
  }
  std::vector<ExchangeMember*> all() {
    std::vector<ExchangeMember*> pointers;
    for (ExchangeMember& member : members) pointers.push_back(&member);
    return pointers;
  }
};

void resetNccl() {
  std::lock_guard<std::mutex> lock(gNccl.mutex);
  gNccl.writeResults = true;
  gNccl.groupEndResult = ncclSuccess;
  gNccl.allGatherResult = ncclSuccess;
  gNccl.refuseAllGather = 0;
  gNccl.asyncAnswers = {ncclSuccess};
  gNccl.asyncCalls = 0;
  gNccl.depth = 0;
  gNccl.groups = 0;
  gNccl.allGathers = 0;
  gNccl.calls.clear();
}

// Polls as the set-up worker does, a bounded number of times.
ExchangeProgress pollUpTo(HostDevice& device, ExchangeMember& member, int polls) {
  ExchangeProgress progress = ExchangeProgress::Pending;
  for (int i = 0; i < polls && progress == ExchangeProgress::Pending; ++i) {
    progress = pollExchange(device, member);
  }
  return progress;
}

}  // namespace

TEST_CASE("scratch layout: our record, then every rank's; the pool's size fits all", "[exchange]") {
  const std::size_t poolBytes = ScratchLayout::forRanks(kMaxRanks).bytes;
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    CAPTURE(ranks);
    const ScratchLayout layout = ScratchLayout::forRanks(ranks);
    CHECK(layout.records.send == 0);
    CHECK(layout.records.receive == sizeof(HandshakeRecord));
    CHECK(layout.records.receiveBytes(ranks) == sizeof(HandshakeRecord) * ranks);
    CHECK(layout.bytes == layout.records.end(ranks));
    CHECK(layout.bytes <= poolBytes);
  }
}

TEST_CASE("exchange: every communicator's records come back, all in one group", "[exchange]") {
  resetNccl();
  HostDevice device;
  Batch batch(2, 3, false);
  CHECK(issueExchange(fakeTable(), device, batch.all()) == ncclSuccess);
  CHECK(gNccl.groups == 1);
  CHECK(gNccl.allGathers == 2);
  for (ExchangeMember& member : batch.members) {
    CHECK(member.issued);
    CHECK(member.launched);  // blocking: on the stream once the group ended
    CHECK(pollExchange(device, member) == ExchangeProgress::Done);
    CHECK(member.failure.empty());
    CHECK_FALSE(member.deviceBusy);
    REQUIRE(member.records.size() == 3);
    for (const HandshakeRecord& record : member.records) {
      CHECK(std::memcmp(&record, &member.record, sizeof(record)) == 0);
    }
  }
}

TEST_CASE("exchange: the caller's own call goes to NCCL in the exchange's group", "[exchange]") {
  resetNccl();
  HostDevice device;
  Batch batch(1, 2, true);
  JoinedCall joined;
  int depthAtCall = -1;
  joined.issue = [&] {
    noteCall("joined");
    depthAtCall = gNccl.depth;
    return ncclSuccess;
  };
  gNccl.groupEndResult = ncclInProgress;  // a nonblocking communicator's group
  CHECK(issueExchange(fakeTable(), device, batch.all(), &joined) == ncclInProgress);
  CHECK(gNccl.calls == std::vector<std::string>{"start", "all-gather", "joined", "end"});
  CHECK(depthAtCall == 1);
  CHECK(joined.answer() == ncclInProgress);  // as NCCL answers the call alone
  CHECK(batch.members[0].issued);
  CHECK_FALSE(batch.members[0].launched);  // NCCL's own thread launches it
}

TEST_CASE("exchange: a nonblocking one is pending until NCCL accepts a later call, and read once it completed",
          "[exchange]") {
  resetNccl();
  gNccl.groupEndResult = ncclInProgress;  // NCCL's own thread launches the group later
  HostDevice device;
  Batch batch(1, 2, true);
  issueExchange(fakeTable(), device, batch.all());
  ExchangeMember& member = batch.members[0];
  const std::size_t callsToNccl = gNccl.calls.size();
  CHECK(pollExchange(device, member) == ExchangeProgress::Pending);
  CHECK(pollExchange(device, member) == ExchangeProgress::Pending);
  CHECK_FALSE(member.launched);
  // The program's next call NCCL took (it refuses every call until its thread launched ours).
  member.comm->noteNcclAccepted();
  device.busy = true;  // launched, its kernel still waiting for a peer
  CHECK(pollExchange(device, member) == ExchangeProgress::Pending);
  CHECK(member.launched);
  CHECK(member.deviceBusy);
  device.busy = false;
  CHECK(pollExchange(device, member) == ExchangeProgress::Done);
  CHECK(member.records.size() == 2);
  CHECK(gNccl.calls.size() == callsToNccl);  // the poll never asks NCCL
  CHECK(gNccl.asyncCalls == 0);
}

TEST_CASE("exchange: an area NCCL did not write reads as 'did not arrive', never as old bytes", "[exchange]") {
  // Scratch is reused between set-ups: the first one leaves valid records behind.
  resetNccl();
  HostDevice device;
  Batch batch(1, 2, false);
  issueExchange(fakeTable(), device, batch.all());
  REQUIRE(pollExchange(device, batch.members[0]) == ExchangeProgress::Done);
  REQUIRE(batch.members[0].records.at(0).magic == kHandshakeMagic);

  gNccl.writeResults = false;  // the next all-gather "succeeds" without writing anything
  batch.members[0].records.clear();
  issueExchange(fakeTable(), device, batch.all());
  REQUIRE(pollExchange(device, batch.members[0]) == ExchangeProgress::Done);
  REQUIRE(batch.members[0].records.size() == 2);
  for (const HandshakeRecord& record : batch.members[0].records) CHECK(record.magic == 0);
  CHECK(judgeRecords(batch.members[0].records).reason == "the handshake record of rank 0 did not arrive");
}

TEST_CASE("exchange: an all-gather NCCL refuses refuses the group: nothing of it entered NCCL's sequence",
          "[exchange]") {
  resetNccl();
  gNccl.allGatherResult = ncclInvalidArgument;  // a nonblocking communicator still in progress
  gNccl.groupEndResult = ncclInvalidArgument;
  HostDevice device;
  Batch batch(1, 2, true);
  JoinedCall joined;
  joined.issue = [] { return ncclInvalidArgument; };
  CHECK(issueExchange(fakeTable(), device, batch.all(), &joined) == ncclInvalidArgument);
  CHECK(batch.members[0].refused);
  CHECK_FALSE(batch.members[0].issued);
  CHECK(joined.answer() == ncclInvalidArgument);  // the program's call is refused with it
  CHECK(batch.members[0].failure.empty());         // not a failure: issued again at the next call
}

TEST_CASE("exchange: one refused member of a batch refuses every member (NCCL runs none of the group)",
          "[exchange]") {
  resetNccl();
  gNccl.refuseAllGather = 2;  // the second communicator is still in progress
  gNccl.groupEndResult = ncclInvalidArgument;
  HostDevice device;
  Batch batch(3, 2, true);
  CHECK(issueExchange(fakeTable(), device, batch.all()) == ncclInvalidArgument);
  for (ExchangeMember& member : batch.members) {
    CAPTURE(member.record.rank);
    CHECK(member.refused);
    CHECK_FALSE(member.issued);
    CHECK_FALSE(member.deviceBusy);
    CHECK(member.failure.empty());  // not broken: issued again at the next set-up point
  }
}

TEST_CASE("exchange: a group NCCL gives up at its end after taking the all-gather fails the communicator, its "
          "scratch kept", "[exchange]") {
  resetNccl();
  gNccl.groupEndResult = ncclInvalidUsage;
  HostDevice device;
  Batch batch(1, 2, false);
  CHECK(issueExchange(fakeTable(), device, batch.all()) == ncclInvalidUsage);
  CHECK_FALSE(batch.members[0].issued);
  CHECK_FALSE(batch.members[0].refused);  // not merely early: broken
  CHECK(batch.members[0].failure == "the set-up's group failed: error");
  CHECK(pollExchange(device, batch.members[0]) == ExchangeProgress::Failed);
  CHECK(batch.members[0].deviceBusy);  // what NCCL left behind is not known
}

TEST_CASE("exchange: a peer that never comes costs a poll, never a wait; an abort ends it", "[exchange]") {
  resetNccl();
  HostDevice device;
  device.busy = true;  // the all-gather kernel waits for a peer forever
  Batch batch(1, 2, false);
  const Clock::time_point start = Clock::now();
  issueExchange(fakeTable(), device, batch.all());
  CHECK(pollUpTo(device, batch.members[0], 1000) == ExchangeProgress::Pending);
  CHECK(Clock::now() - start < std::chrono::seconds(2));
  // An abort closes the gate: no call of ours follows, and the scratch is never handed to
  // another set-up while NCCL's all-gather may still write it.
  REQUIRE(batch.members[0].comm->gate().close(kGateCloseSeconds));
  const std::size_t calls = gNccl.calls.size();
  CHECK(pollExchange(device, batch.members[0]) == ExchangeProgress::Failed);
  CHECK(batch.members[0].failure.find("stopped") == 0);
  CHECK(batch.members[0].deviceBusy);
  CHECK(gNccl.calls.size() == calls);
  // Nor is a closed communicator's exchange issued again.
  Batch again(1, 2, false);
  again.members[0].comm = batch.members[0].comm;
  issueExchange(fakeTable(), device, again.all());
  CHECK(gNccl.allGathers == 1);
  CHECK_FALSE(again.members[0].issued);
}
