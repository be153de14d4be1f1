// The eligibility verdict from the handshake tables: every rank computes it from the same
// data, so these pure functions decide for the whole communicator.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "handshake/verdict.h"

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

TEST_CASE("verdict: a record that did not arrive (cleared area) is named, never read as data", "[verdict]") {
  std::vector<HandshakeRecord> all = records(4);
  all[2] = HandshakeRecord{};  // what the cleared receive area holds when rank 2's bytes never came
  const Verdict verdict = judgeRecords(all);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.unexpected);
  CHECK(verdict.reason == "the handshake record of rank 2 did not arrive");
}

TEST_CASE("verdict: a peer's text fields must end inside the record", "[verdict]") {
  // The bus id and host are later passed to CUDA, NVML and std::string as C strings.
  std::vector<HandshakeRecord> all = records(2);
  std::memset(all[1].busId, 'A', sizeof(all[1].busId));
  CHECK(judgeRecords(all).reason == "rank 1 sent a malformed handshake (another nccl-car version?)");
  all = records(2);
  std::memset(all[0].host, 'h', sizeof(all[0].host));
  CHECK_FALSE(judgeRecords(all).eligible);
  all = records(2);
  std::memset(all[1].busId, 'A', sizeof(all[1].busId) - 1);  // the last byte is the NUL: fine
  CHECK(judgeRecords(all).eligible);
  CHECK(fieldText(all[1].busId).size() == sizeof(all[1].busId) - 1);
}

TEST_CASE("verdict: a rank without its release board makes every rank forward", "[verdict]") {
  std::vector<HandshakeRecord> all = records(3);
  all[1].status = RankStatus::NoBoard;
  const Verdict verdict = judgeRecords(all);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.unexpected);
  CHECK(verdict.reason.find("rank 1 could not create its release board") == 0);
}

TEST_CASE("verdict: a rank without room for a block under NCCL_CAR_GPU_MEMORY_BYTES makes every rank forward, "
          "without a WARN (the user's own bound)", "[verdict][budget]") {
  std::vector<HandshakeRecord> all = records(4);
  all[2].status = RankStatus::NoRoom;
  const Verdict verdict = judgeRecords(all);
  CHECK_FALSE(verdict.eligible);
  CHECK_FALSE(verdict.unexpected);
  CHECK(verdict.reason == "rank 2 has no room for another buffer block within its NCCL_CAR_GPU_MEMORY_BYTES");
}

TEST_CASE("verdict: NCCL's P2P settings on any rank limit us as they limit NCCL", "[verdict][p2p]") {
  // NCCL_P2P_DISABLE=1 (or NCCL_P2P_LEVEL=LOC) on one rank: nothing is mapped at all.
  std::vector<HandshakeRecord> all = records(2);
  all[1].p2pLimit = static_cast<std::int32_t>(P2pLimit::Off);
  const Verdict off = judgeRecords(all);
  CHECK_FALSE(off.eligible);
  CHECK_FALSE(off.unexpected);  // a setting, not a fault
  CHECK(off.reason.find("rank 1") != std::string::npos);

  // A level below SYS: NVLink only. Two ranks over PCIe forward; with NVLink they do not.
  all = records(2);
  all[0].p2pLimit = static_cast<std::int32_t>(P2pLimit::NvlinkOnly);
  CHECK(judgeRecords(all).eligible);
  CHECK(judgeLinks(all, fullReports(2, true)).eligible);
  const Verdict pcie = judgeLinks(all, fullReports(2, false));
  CHECK_FALSE(pcie.eligible);
  CHECK(pcie.reason.find("NCCL_P2P_LEVEL on rank 0") == 0);

  // Without a limit, two ranks over PCIe stay eligible (the rule before this setting).
  CHECK(judgeLinks(records(2), fullReports(2, false)).eligible);
  all = records(2);
  all[1].p2pLimit = 7;  // not a value any build sends
  CHECK_FALSE(judgeRecords(all).eligible);
}

TEST_CASE("verdict: a process driving several GPUs with peers in other processes forwards", "[verdict]") {
  // nccl-tests -g 2 under MPI: processes A (ranks 0, 1 on GPUs 0, 1) and B (ranks 2, 3 on GPUs 0, 1).
  auto all = records(4);
  all[1].pid = all[0].pid;
  all[3].pid = all[2].pid;
  std::strcpy(all[2].busId, all[0].busId);
  std::strcpy(all[3].busId, all[1].busId);
  Verdict verdict = judgeRecords(all);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.reason.find("drives several GPUs") != std::string::npos);
  CHECK(processOnSeveralGpusWithIpcPeers(all) == 0);

  // One GPU per process (torchrun), or several GPUs in one process alone (nccl-tests -g 4): ours.
  CHECK(judgeRecords(records(4)).eligible);
  auto oneProcess = records(4);
  for (auto& record : oneProcess) record.pid = oneProcess[0].pid;
  CHECK(judgeRecords(oneProcess).eligible);
  // Two ranks of one process on ONE GPU with a peer elsewhere (the one-GPU rig's threads): ours.
  auto sharedGpu = records(3);
  sharedGpu[1].pid = sharedGpu[0].pid;
  std::strcpy(sharedGpu[1].busId, sharedGpu[0].busId);
  CHECK_FALSE(processOnSeveralGpusWithIpcPeers(sharedGpu).has_value());
  CHECK(judgeRecords(sharedGpu).eligible);
}
