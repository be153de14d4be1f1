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

// Every rank reaches every peer. With `nvlink`, over NVLink; else over PCIe along `path`, NVML
// agreeing with CUDA (its P2P write status), as a PCIe-only machine reports it.
std::vector<LinkReport> fullReports(int ranks, bool nvlink = true, PciePath path = PciePath::Pxb) {
  std::vector<LinkReport> all(ranks);
  for (auto& report : all) {
    report.magic = kHandshakeMagic;
    report.mapped = 1;
    report.p2pMask = (1u << ranks) - 1;
    report.nvlinkMask = nvlink ? (1u << ranks) - 1 : 0;
    report.nvmlWriteMask = (1u << ranks) - 1;
    for (int p = 0; p < ranks; ++p) report.pciePath[p] = static_cast<std::uint8_t>(nvlink ? PciePath::Unknown : path);
  }
  for (int r = 0; r < ranks; ++r) {
    all[r].nvlinkMask |= 1u << r;
    all[r].pciePath[r] = static_cast<std::uint8_t>(PciePath::Unknown);
  }
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

TEST_CASE("verdict: 2 to 8 ranks over PCIe are eligible as the PCIe case, not the NVLink one", "[verdict][pcie]") {
  for (int ranks = 2; ranks <= 8; ++ranks) {
    for (PciePath path : {PciePath::Pix, PciePath::Pxb, PciePath::Phb}) {
      const Verdict verdict = judgeLinks(records(ranks), fullReports(ranks, false, path));
      CAPTURE(ranks, pciePathName(path), verdict.reason);
      CHECK(verdict.eligible);
      CHECK_FALSE(verdict.fullNvlink);
      CHECK(verdict.longestPath == path);
      CHECK(verdict.nvlinkPairs == 0);
      CHECK(linksText(verdict, ranks) == std::string("pcie (every pair peer-to-peer, ") + pciePathName(path) +
                                             " at most)");
    }
  }
  // One pair's longer path is the one the line names.
  auto reports = fullReports(4, false, PciePath::Pix);
  reports[3].pciePath[1] = static_cast<std::uint8_t>(PciePath::Phb);
  CHECK(judgeLinks(records(4), reports).longestPath == PciePath::Phb);
  // NVLink on some pairs only (bridged pairs): still the PCIe case, and the line says how many.
  reports = fullReports(4, false, PciePath::Pxb);
  reports[0].nvlinkMask |= 1u << 1;
  reports[1].nvlinkMask |= 1u << 0;
  reports[2].nvlinkMask |= 1u << 3;  // seen from one side only: no NVLink
  const Verdict bridged = judgeLinks(records(4), reports);
  CHECK(bridged.eligible);
  CHECK_FALSE(bridged.fullNvlink);
  CHECK(bridged.nvlinkPairs == 1);
  CHECK(linksText(bridged, 4) == "pcie (every pair peer-to-peer, PXB at most; NVLink on 1 of 6 pairs)");
  CHECK(linksText(judgeLinks(records(4), fullReports(4)), 4) == "full nvlink");
}

TEST_CASE("verdict: over PCIe, NVML must agree with CUDA and name the path", "[verdict][pcie]") {
  // CUDA allows peer access, NVML reports no peer-to-peer writes (one direction suffices).
  auto reports = fullReports(3, false);
  reports[2].nvmlWriteMask &= ~(1u << 0);
  Verdict verdict = judgeLinks(records(3), reports);
  CHECK_FALSE(verdict.eligible);
  CHECK_FALSE(verdict.unexpected);
  CHECK(verdict.reason == "CUDA allows peer-to-peer access between rank 0 and rank 2 over PCIe, but NVML reports no "
                          "peer-to-peer writes between their GPUs");
  // A path NVML did not give.
  reports = fullReports(3, false);
  reports[1].pciePath[2] = static_cast<std::uint8_t>(PciePath::Unknown);
  verdict = judgeLinks(records(3), reports);
  CHECK_FALSE(verdict.eligible);
  CHECK(verdict.unexpected);
  CHECK(verdict.reason == "NVML cannot tell the PCIe path between the GPUs of rank 1 and rank 2");
  // NVML's write status does not matter between NVLink pairs.
  reports = fullReports(3);
  for (auto& report : reports) report.nvmlWriteMask = 0;
  CHECK(judgeLinks(records(3), reports).eligible);
}

TEST_CASE("verdict: a rank without NVML cannot see NVLink or PCIe; everyone forwards with a WARN", "[verdict]") {
  // What that rank reports: peers on other GPUs reachable, but no NVLink bit, no NVML write
  // status and no path for them.
  for (int ranks : {2, 4}) {
    auto reports = fullReports(ranks);
    reports[1].nvmlMissing = 1;
    reports[1].nvlinkMask = 1u << 1;
    reports[1].nvmlWriteMask = 1u << 1;
    for (auto& path : reports[1].pciePath) path = static_cast<std::uint8_t>(PciePath::Unknown);
    const Verdict verdict = judgeLinks(records(ranks), reports);
    CAPTURE(ranks);
    CHECK_FALSE(verdict.eligible);
    CHECK(verdict.unexpected);
    CHECK(verdict.reason.find("rank 1 cannot load NVML") == 0);
  }
  // NVML missing does not matter when NVLink was confirmed anyway (all ranks on one GPU).
  auto sameGpu = fullReports(4);
  sameGpu[2].nvmlMissing = 1;
  CHECK(judgeLinks(records(4), sameGpu).eligible);
}

TEST_CASE("verdict: a pair without peer access forwards", "[verdict]") {
  auto reports = fullReports(2, false);
  reports[1].p2pMask = 1u << 1;  // CUDA says no (NVML's write status may say yes)
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

TEST_CASE("verdict: a rank without its release board, or that failed before the exchange, makes every rank forward",
          "[verdict]") {
  const std::vector<std::pair<RankStatus, std::string>> cases = {
      {RankStatus::NoBoard, "rank 1 could not create its release board"},
      {RankStatus::Failed, "rank 1 failed before the set-up's exchange (its log says why)"},
  };
  for (const auto& [status, reason] : cases) {
    CAPTURE(reason);
    std::vector<HandshakeRecord> all = records(3);
    all[1].status = status;
    const Verdict verdict = judgeRecords(all);
    CHECK_FALSE(verdict.eligible);
    CHECK(verdict.unexpected);
    CHECK(verdict.reason.rfind(reason, 0) == 0);
  }
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

  // NVLink only (NVL, NVB, C2C): PCIe communicators forward; with NVLink they do not.
  all = records(2);
  all[0].p2pLimit = static_cast<std::int32_t>(P2pLimit::NvlinkOnly);
  CHECK(judgeRecords(all).eligible);
  CHECK(judgeLinks(all, fullReports(2, true)).eligible);
  const Verdict pcie = judgeLinks(all, fullReports(2, false));
  CHECK_FALSE(pcie.eligible);
  CHECK(pcie.reason.find("NCCL_P2P_LEVEL on rank 0") == 0);

  // A PCIe level allows the paths up to it, on every rank the most restrictive one.
  all = records(4);
  all[2].p2pLimit = static_cast<std::int32_t>(P2pLimit::UpToPxb);
  CHECK(judgeLinks(all, fullReports(4, false, PciePath::Pix)).eligible);
  CHECK(judgeLinks(all, fullReports(4, false, PciePath::Pxb)).eligible);
  const Verdict phb = judgeLinks(all, fullReports(4, false, PciePath::Phb));
  CHECK_FALSE(phb.eligible);
  CHECK_FALSE(phb.unexpected);
  CHECK(phb.reason == "NCCL_P2P_LEVEL=PXB on rank 2 does not allow the PCIe path PHB between rank 0 and rank 1");
  all[3].p2pLimit = static_cast<std::int32_t>(P2pLimit::UpToPix);
  CHECK(judgeLinks(all, fullReports(4, false, PciePath::Pxb)).reason.find("NCCL_P2P_LEVEL=PIX on rank 3") == 0);
  // An NVLink-only level on one rank and a PCIe one on another: NVLink only.
  all[1].p2pLimit = static_cast<std::int32_t>(P2pLimit::NvlinkOnly);
  CHECK(judgeLinks(all, fullReports(4, false, PciePath::Pix)).reason.find("NCCL_P2P_LEVEL on rank 1") == 0);

  // Across CPU sockets (SYS): only where NCCL_P2P_LEVEL=SYS says so.
  const Verdict sockets = judgeLinks(records(2), fullReports(2, false, PciePath::Sys));
  CHECK_FALSE(sockets.eligible);
  CHECK_FALSE(sockets.unexpected);
  CHECK(sockets.reason == "rank 0 and rank 1 are on different CPU sockets (PCIe path SYS); NCCL_P2P_LEVEL=SYS "
                          "would allow peer-to-peer access across them");
  all = records(2);
  for (auto& record : all) record.p2pLimit = static_cast<std::int32_t>(P2pLimit::AnyPath);
  const Verdict allowed = judgeLinks(all, fullReports(2, false, PciePath::Sys));
  CHECK(allowed.eligible);
  CHECK(allowed.longestPath == PciePath::Sys);
  // SYS on one rank only: the other rank's default still keeps the pair off.
  all[1].p2pLimit = static_cast<std::int32_t>(P2pLimit::None);
  CHECK_FALSE(judgeLinks(all, fullReports(2, false, PciePath::Sys)).eligible);

  // Without a limit, ranks over PCIe within a socket stay eligible.
  CHECK(judgeLinks(records(2), fullReports(2, false, PciePath::Phb)).eligible);
  all = records(2);
  all[1].p2pLimit = kP2pLimitCount;  // not a value any build sends
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

namespace {

ChoiceTable tableOf(const std::string& rows) {
  std::string why;
  const std::optional<ChoiceTable> table =
      ChoiceTable::parse("nccl-car choice table 2\nfingerprint 0000000000000001\n" + rows, 1, &why);
  INFO(why);
  REQUIRE(table.has_value());
  return *table;
}

// The records with NCCL_CAR_ALGO set to `forced` on every rank (as judgeRecords requires).
std::vector<HandshakeRecord> forcing(std::vector<HandshakeRecord> all, Algorithm forced) {
  Config config;
  config.algorithm = forced;
  for (auto& record : all) record.settings = sharedSettingsOf(config);
  return all;
}

}  // namespace

TEST_CASE("verdict: over PCIe, a world size nothing measured is not eligible, counted untuned, naming nccl-car tune",
          "[verdict][pcie]") {
  const std::vector<HandshakeRecord> all = records(4);
  const Verdict pcie = judgeTuning(judgeLinks(all, fullReports(4, false)), all, nullptr);
  CHECK_FALSE(pcie.eligible);
  CHECK_FALSE(pcie.unexpected);  // a case we do not serve yet, not a fault: no WARN
  CHECK(pcie.forwardAs == ForwardReason::Untuned);
  CHECK_FALSE(pcie.fullNvlink);  // the links it found stay in it
  CHECK(pcie.reason == "pcie untuned (ipc peers, pcie (every pair peer-to-peer, PXB at most), sm_90): every call goes "
                       "to NCCL (untuned) until `nccl-car tune` has measured 4 ranks over PCIe on this machine");
  // Rows of the NVLink case, or of another world size, do not tune it.
  const ChoiceTable other = tableOf("all-reduce 4 nvlink half 0 100 1shot\nall-reduce 2 pcie half 0 100 1shot\n");
  CHECK(judgeTuning(judgeLinks(all, fullReports(4, false)), all, &other).reason == pcie.reason);
  // Any row of its own case, even one that gives NCCL a size: eligible, the table decides.
  const ChoiceTable measured = tableOf("all-gather 4 pcie any 0 100 nccl\n");
  const Verdict tuned = judgeTuning(judgeLinks(all, fullReports(4, false)), all, &measured);
  CHECK(tuned.eligible);
  CHECK(tuned.reason.empty());
  CHECK(tuned.forwardAs == ForwardReason::NotEligible);
  // NCCL_CAR_ALGO forcing a push kernel: eligible (how nccl-car tune times an unmeasured machine);
  // forcing a pull kernel, which never runs over PCIe, is no reason to hold a block.
  for (Algorithm forced : {Algorithm::OneShotPush, Algorithm::TwoShotPush}) {
    const std::vector<HandshakeRecord> pushing = forcing(all, forced);
    CHECK(judgeTuning(judgeLinks(pushing, fullReports(4, false)), pushing, nullptr).eligible);
  }
  for (Algorithm forced : {Algorithm::OneStage, Algorithm::TwoStage}) {
    const std::vector<HandshakeRecord> pulling = forcing(all, forced);
    CHECK(judgeTuning(judgeLinks(pulling, fullReports(4, false)), pulling, nullptr).forwardAs ==
          ForwardReason::Untuned);
  }
  // The same process, NVLink on some pairs, mixed GPUs: said as the eligible line would say them.
  std::vector<HandshakeRecord> mixed = records(3);
  for (auto& record : mixed) record.pid = mixed[0].pid;
  mixed[2].computeCapability = 89;
  std::vector<LinkReport> reports = fullReports(3, false, PciePath::Pix);
  reports[0].nvlinkMask |= 1u << 1;
  reports[1].nvlinkMask |= 1u << 0;
  CHECK(judgeTuning(judgeLinks(mixed, reports), mixed, nullptr).reason ==
        "pcie untuned (same-process peers, pcie (every pair peer-to-peer, PIX at most; NVLink on 1 of 3 pairs), "
        "sm_mixed): every call goes to NCCL (untuned) until `nccl-car tune` has measured 3 ranks over PCIe on this "
        "machine");
  // Every other verdict passes unchanged: the NVLink case, and a refusal (which keeps its own reason).
  const Verdict nvlink = judgeTuning(judgeLinks(all, fullReports(4)), all, nullptr);
  CHECK(nvlink.eligible);
  const Verdict sockets =
      judgeTuning(judgeLinks(records(2), fullReports(2, false, PciePath::Sys)), records(2), nullptr);
  CHECK(sockets.forwardAs == ForwardReason::NotEligible);
  CHECK(sockets.reason.find("different CPU sockets") != std::string::npos);
}

TEST_CASE("verdict: an eligible PCIe communicator's setup line says what made it eligible", "[verdict][pcie]") {
  const Verdict pcie = judgeLinks(records(4), fullReports(4, false));
  REQUIRE(pcie.eligible);
  const ChoiceTable measured = tableOf("all-gather 4 pcie any 0 100 nccl\n");
  CHECK(tuningNote(pcie, 4, &measured, std::nullopt)
            .rfind("pcie tuned: the choice table's rows for 4 ranks over PCIe decide", 0) == 0);
  const ChoiceTable other = tableOf("all-reduce 2 pcie half 0 100 1shot\n");
  CHECK(tuningNote(pcie, 4, &other, Algorithm::TwoShotPush) ==
        "pcie forced: NCCL_CAR_ALGO=2shot takes the all-reduces it can run; every other call goes to NCCL (untuned) "
        "until `nccl-car tune` has measured 4 ranks over PCIe on this machine");
  // The NVLink case adds nothing.
  CHECK(tuningNote(judgeLinks(records(4), fullReports(4)), 4, nullptr, std::nullopt).empty());
}
