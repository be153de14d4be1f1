// The handshake's all-gathers (shim/handshake/handshake_exchange.h) against a fake NCCL and a host
// "device": what is read back, NCCL's own errors, and aborts that come while we wait.
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
  std::vector<ncclResult_t> asyncAnswers;  // ncclCommGetAsyncError, in turn; the last repeats
  std::size_t asyncCalls = 0;
  int groups = 0;
  int allGathers = 0;
  std::vector<Clock::time_point> callTimes;  // of every call on a communicator
  std::mutex mutex;
};
FakeNccl gNccl;

void noteCall() {
  std::lock_guard<std::mutex> lock(gNccl.mutex);
  gNccl.callTimes.push_back(Clock::now());
}

ncclResult_t fakeGroupStart() { return ncclSuccess; }
ncclResult_t fakeGroupEnd() {
  ++gNccl.groups;
  return ncclSuccess;
}
ncclResult_t fakeAllGather(const void* send, void* recv, size_t bytes, ncclDataType_t, ncclComm_t comm, cudaStream_t) {
  noteCall();
  ++gNccl.allGathers;
  const int ranks = *reinterpret_cast<const int*>(&comm);  // the tests pass the rank count as the handle
  if (gNccl.writeResults) {
    for (int r = 0; r < ranks; ++r) std::memcpy(static_cast<char*>(recv) + r * bytes, send, bytes);
  }
  return ncclSuccess;
}
ncclResult_t fakeAsyncError(ncclComm_t, ncclResult_t* async) {
  noteCall();
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
  bool stage(BatchMember& member, std::size_t offset, const void* data, std::size_t bytes, std::size_t clearOffset,
             std::size_t clearBytes) override {
    std::memcpy(member.scratch + offset, data, bytes);
    std::memset(member.scratch + clearOffset, 0, clearBytes);
    return true;
  }
  StreamState query(BatchMember&) override { return busy ? StreamState::Busy : StreamState::Idle; }
  bool readBack(BatchMember& member, std::size_t offset, void* out, std::size_t bytes) override {
    std::memcpy(out, member.scratch + offset, bytes);
    return true;
  }
  std::atomic<bool> busy{false};
};

struct Batch {
  std::vector<std::vector<char>> scratch;
  std::vector<BatchMember> members;
  Batch(int communicators, int ranks, bool nonblocking) {
    scratch.assign(communicators, std::vector<char>(ScratchLayout::forRanks(kMaxRanks).bytes));
    members.resize(communicators);
    for (int i = 0; i < communicators; ++i) {
      BatchMember& member = members[i];
      ncclComm_t comm = nullptr;
      std::memcpy(&comm, &ranks, sizeof(ranks));
      member.state = std::make_shared<CommState>(comm, nonblocking);
      member.state->learnIdentity(0, ranks, 0);
      member.scratch = scratch[i].data();
      member.inHandshake = true;
      member.record.magic = kHandshakeMagic;
      member.record.rank = i;
      member.record.ranks = ranks;
      member.record.pid = 4000 + i;
    }
  }
};

void resetNccl() {
  std::lock_guard<std::mutex> lock(gNccl.mutex);
  gNccl.writeResults = true;
  gNccl.asyncAnswers = {ncclSuccess};
  gNccl.asyncCalls = 0;
  gNccl.groups = 0;
  gNccl.allGathers = 0;
  gNccl.callTimes.clear();
}

}  // namespace

TEST_CASE("scratch layout: our item, then every rank's, for records then reports; the pool's size fits all",
          "[exchange]") {
  const std::size_t poolBytes = ScratchLayout::forRanks(kMaxRanks).bytes;
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    CAPTURE(ranks);
    const ScratchLayout layout = ScratchLayout::forRanks(ranks);
    CHECK(layout.records.send == 0);
    CHECK(layout.records.receive == sizeof(HandshakeRecord));
    CHECK(layout.records.receiveBytes(ranks) == sizeof(HandshakeRecord) * ranks);
    CHECK(layout.reports.send == layout.records.end(ranks));
    CHECK(layout.reports.receive == layout.reports.send + sizeof(LinkReport));
    CHECK(layout.bytes == layout.reports.end(ranks));
    CHECK(layout.bytes <= poolBytes);
  }
}

TEST_CASE("exchange: every communicator's records come back, all in one group", "[exchange]") {
  resetNccl();
  HostDevice device;
  Batch batch(2, 3, false);
  exchangeRecords(fakeTable(), device, batch.members);
  CHECK(gNccl.groups == 1);
  CHECK(gNccl.allGathers == 2);
  for (const BatchMember& member : batch.members) {
    CHECK(member.failure.empty());
    REQUIRE(member.records.size() == 3);
    for (const HandshakeRecord& record : member.records) {
      CHECK(std::memcmp(&record, &member.record, sizeof(record)) == 0);
    }
  }
}

TEST_CASE("exchange: an area NCCL did not write reads as 'did not arrive', never as old bytes", "[exchange]") {
  // Scratch is reused between handshakes: the first one leaves valid records behind.
  resetNccl();
  HostDevice device;
  Batch batch(1, 2, false);
  batch.members[0].record.rank = 0;
  exchangeRecords(fakeTable(), device, batch.members);
  REQUIRE(batch.members[0].records.at(0).magic == kHandshakeMagic);

  gNccl.writeResults = false;  // the next all-gather "succeeds" without writing anything
  batch.members[0].records.clear();
  exchangeRecords(fakeTable(), device, batch.members);
  REQUIRE(batch.members[0].records.size() == 2);
  for (const HandshakeRecord& record : batch.members[0].records) CHECK(record.magic == 0);
  CHECK(judgeRecords(batch.members[0].records).reason == "the handshake record of rank 0 did not arrive");
}

TEST_CASE("exchange: a nonblocking all-gather that ends in an error fails the communicator", "[exchange]") {
  resetNccl();
  gNccl.asyncAnswers = {ncclInProgress, ncclInProgress, ncclRemoteError};
  HostDevice device;
  Batch batch(1, 2, true);
  exchangeRecords(fakeTable(), device, batch.members);
  CHECK(batch.members[0].failure == "handshake all-gather failed: remote error");
  CHECK(batch.members[0].records.empty());  // nothing read back
}

TEST_CASE("exchange: an abort while we poll NCCL ends the exchange; no call of ours follows it", "[exchange]") {
  resetNccl();
  gNccl.asyncAnswers = {ncclInProgress};  // a peer that never comes
  HostDevice device;
  Batch batch(1, 2, true);
  Clock::time_point closedAt;
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    batch.members[0].state->gate().close(kGateCloseSeconds);
    closedAt = Clock::now();
  });
  exchangeRecords(fakeTable(), device, batch.members);
  watchdog.join();
  CHECK(batch.members[0].failure.find("stopped") == 0);
  REQUIRE(gNccl.asyncCalls > 1);
  for (const Clock::time_point& call : gNccl.callTimes) CHECK(call <= closedAt);

  // The next exchange issues nothing for it.
  const int allGathers = gNccl.allGathers;
  exchangeReports(fakeTable(), device, batch.members);
  CHECK(gNccl.allGathers == allGathers);
}

TEST_CASE("exchange: an all-gather NCCL never stops is waited for only so long after an abort", "[exchange]") {
  resetNccl();
  HostDevice device;
  device.busy = true;  // the all-gather kernel waits for a peer forever
  Batch batch(1, 2, false);
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    batch.members[0].state->gate().close(kGateCloseSeconds);
  });
  ExchangeLimits limits;
  limits.drainAfterStopSeconds = 0.2;
  const Clock::time_point start = Clock::now();
  exchangeRecords(fakeTable(), device, batch.members, limits);
  watchdog.join();
  CHECK(Clock::now() - start < std::chrono::seconds(2));
  CHECK(batch.members[0].deviceBusy);  // its scratch is never handed to another handshake
  CHECK(batch.members[0].failure.find("stopped") == 0);
}
