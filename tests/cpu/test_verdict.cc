// The eligibility verdict from the handshake tables: every rank computes it from the same
// data, so these pure functions decide for the whole communicator.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "verdict.h"

using namespace car;

namespace {

HandshakeRecord recordOf(int rank, int ranks, int pid = 1000) {
  HandshakeRecord record{};
  record.magic = kHandshakeMagic;
  record.status = RankStatus::Ready;
  record.rank = rank;
  record.ranks = ranks;
  record.pid = pid + rank;  // one process per rank unless a test says otherwise
  record.ipcNamespace = 4026531839u;
  record.pidNamespace = 4026531836u;
  std::strcpy(record.host, "node1/0f3c-boot");
  std::snprintf(record.busId, sizeof(record.busId), "0000:%02X:00.0", 0x10 + rank);
  record.settings = sharedSettingsOf(Config{});
  record.computeCapability = 90;
  return record;
}

std::vector<HandshakeRecord> records(int ranks) {
  std::vector<HandshakeRecord> all;
  for (int r = 0; r < ranks; ++r) all.push_back(recordOf(r, ranks));
  return all;
}

std::vector<LinkReport> fullReports(int ranks, bool nvlink = true) {
  std::vector<LinkReport> all(ranks);
  for (auto& report : all) {
    report.magic = kHandshakeMagic;
    report.mapped = 1;
    report.p2pMask = (1u << ranks) - 1;
    report.nvlinkMask = nvlink ? (1u << ranks) - 1 : 0;
  }
  for (int r = 0; r < ranks; ++r) all[r].nvlinkMask |= 1u << r;
  return all;
}

}  // namespace

TEST_CASE("verdict: one host, mapped, full NVLink -> eligible", "[verdict]") {
  for (int ranks = 2; ranks <= 8; ++ranks) {
    const Verdict verdict = judgeLinks(records(ranks), fullReports(ranks));
    CAPTURE(ranks, verdict.reason);
    CHECK(verdict.eligible);
    CHECK(verdict.fullNvlink);
    CHECK_FALSE(verdict.allSameProcess);
    CHECK(verdict.computeCapability == 90);
  }
}

TEST_CASE("verdict: GPUs of different architectures leave the tuned thresholds unused", "[verdict]") {
  std::vector<HandshakeRecord> all = records(4);
  all[3].computeCapability = 80;
  const Verdict verdict = judgeLinks(all, fullReports(4));
  CHECK(verdict.eligible);
  CHECK(verdict.computeCapability == 0);
}

TEST_CASE("verdict: two ranks need peer access but not NVLink; more need full NVLink", "[verdict]") {
  CHECK(judgeLinks(records(2), fullReports(2, false)).eligible);
  CHECK_FALSE(judgeLinks(records(2), fullReports(2, false)).fullNvlink);
  const Verdict four = judgeLinks(records(4), fullReports(4, false));
  CHECK_FALSE(four.eligible);
  CHECK(four.reason.find("NVLink") != std::string::npos);
  CHECK_FALSE(four.unexpected);

  auto reports = fullReports(4);
  reports[2].nvlinkMask &= ~(1u << 3);  // one missing link, seen from one side only
  CHECK_FALSE(judgeLinks(records(4), reports).eligible);
}

TEST_CASE("verdict: a rank without NVML cannot confirm NVLink; everyone forwards with a WARN", "[verdict]") {
  // What that rank reports: peers on other GPUs reachable, but no NVLink bit for them.
  auto reports = fullReports(4);
  reports[1].nvmlMissing = 1;
  reports[1].nvlinkMask = 1u << 1;
  const Verdict verdict = judgeLinks(records(4), reports);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.unexpected);
  CHECK(verdict.reason.find("rank 1 cannot load NVML") != std::string::npos);
  // Two ranks need no NVLink: still ours.
  auto two = fullReports(2, false);
  two[0].nvmlMissing = 1;
  CHECK(judgeLinks(records(2), two).eligible);
  // NVML missing does not matter when NVLink was confirmed anyway (all ranks on one GPU).
  auto sameGpu = fullReports(4);
  sameGpu[2].nvmlMissing = 1;
  CHECK(judgeLinks(records(4), sameGpu).eligible);
}

TEST_CASE("verdict: a pair without peer access forwards", "[verdict]") {
  auto reports = fullReports(2, false);
  reports[1].p2pMask = 1u << 1;
  const Verdict verdict = judgeLinks(records(2), reports);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.reason.find("peer-to-peer") != std::string::npos);
}

TEST_CASE("verdict: ranks on two hosts forward", "[verdict]") {
  auto all = records(4);
  std::strcpy(all[3].host, "node2/77aa-boot");
  const Verdict verdict = judgeRecords(all);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.reason == "ranks span 2 hosts");
  CHECK_FALSE(verdict.unexpected);
}

TEST_CASE("verdict: a rank without buffers or CUDA makes everyone forward, with a WARN", "[verdict]") {
  auto all = records(3);
  all[1].status = RankStatus::NoBuffers;
  Verdict verdict = judgeRecords(all);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.unexpected);
  CHECK(verdict.reason.find("rank 1") != std::string::npos);
  all[1].status = RankStatus::NoDevice;
  CHECK_FALSE(judgeRecords(all).eligible);
}

TEST_CASE("verdict: settings that differ name the variable", "[verdict]") {
  auto all = records(2);
  Config other;
  other.maxBytes = 1 << 20;
  all[1].settings = sharedSettingsOf(other);
  const Verdict verdict = judgeRecords(all);
  CHECK_FALSE(verdict.eligible);
  REQUIRE(verdict.differingVariable != nullptr);
  CHECK(std::string(verdict.differingVariable) == "NCCL_CAR_MAX_BYTES");
}

TEST_CASE("verdict: processes in different IPC namespaces forward; one process needs none", "[verdict]") {
  auto all = records(2);
  all[1].ipcNamespace = 4026532999u;
  Verdict verdict = judgeRecords(all);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.reason.find("IPC namespace") != std::string::npos);
  CHECK(verdict.unexpected);

  all[1].pid = all[0].pid;  // the same process: pointers, no IPC
  verdict = judgeRecords(all);
  CHECK(verdict.eligible);
  CHECK(verdict.allSameProcess);
}

TEST_CASE("verdict: a rank that could not map its peers makes everyone forward", "[verdict]") {
  auto reports = fullReports(3);
  reports[2].mapped = 0;
  std::strcpy(reports[2].problem, "rank 0: invalid resource handle");
  const Verdict verdict = judgeLinks(records(3), reports);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.unexpected);
  CHECK(verdict.reason.find("invalid resource handle") != std::string::npos);
}

TEST_CASE("verdict: malformed or out-of-range tables forward", "[verdict]") {
  auto all = records(2);
  all[1].magic = 0;
  CHECK_FALSE(judgeRecords(all).eligible);
  all = records(2);
  all[1].rank = 0;  // two ranks claiming rank 0
  CHECK_FALSE(judgeRecords(all).eligible);
  CHECK_FALSE(judgeRecords(records(1)).eligible);
  CHECK_FALSE(judgeRecords(records(9)).eligible);
  CHECK_FALSE(judgeLinks(records(2), {}).eligible);
}
