#include "handshake/verdict.h"

#include "../kernels/rank_signal.h"
#include "log.h"

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

namespace car {
namespace {

template <std::size_t N>
bool terminated(const char (&field)[N]) {
  return strnlen(field, N) < N;
}

bool knownP2pLimit(std::int32_t value) { return value >= 0 && value < kP2pLimitCount; }

// Whether NCCL_CAR_ALGO, as a record carries it (0: auto; 1 + the forced kernel), forces a
// push kernel of the all-reduce: the one way calls of an unmeasured PCIe case are ours.
bool forcesPushKernel(const SharedSettings& settings) {
  const std::int32_t value = settings.algorithm;
  return value > 0 && value <= kAllReduceAlgorithmCount && isPush(static_cast<Algorithm>(value - 1));
}

// Whether bit b of rank a's mask and bit a of rank b's are both set.
bool bothWays(const std::vector<LinkReport>& reports, int a, int b, std::uint32_t LinkReport::*mask) {
  return (reports[a].*mask >> b & 1u) != 0 && (reports[b].*mask >> a & 1u) != 0;
}

}  // namespace

std::string worldSizeRefusal(int ranks) {
  return fmt::format("{} ranks (we take {} to {})", ranks, kMinRanks, kMaxRanks);
}

bool sameProcess(const HandshakeRecord& a, const HandshakeRecord& b) {
  return a.pid == b.pid && a.pidNamespace == b.pidNamespace && fieldText(a.host) == fieldText(b.host);
}

Verdict judgeRecords(const std::vector<HandshakeRecord>& records) {
  Verdict verdict;
  const int ranks = static_cast<int>(records.size());
  if (!takesWorldSize(ranks)) {
    verdict.reason = worldSizeRefusal(ranks);
    return verdict;
  }
  std::set<std::string> hosts;
  for (int r = 0; r < ranks; ++r) {
    const HandshakeRecord& record = records[r];
    if (record.magic == 0) {  // the receive area is cleared before the exchange
      verdict.unexpected = true;
      verdict.reason = fmt::format("the handshake record of rank {} did not arrive", r);
      return verdict;
    }
    if (record.magic != kHandshakeMagic || record.rank != r || record.ranks != ranks || !terminated(record.host) ||
        !terminated(record.busId) || !knownP2pLimit(record.p2pLimit)) {
      verdict.reason = fmt::format("rank {} sent a malformed handshake (another nccl-car version?)", r);
      return verdict;
    }
    if (record.status == RankStatus::NoBuffers) {
      verdict.unexpected = true;
      verdict.reason = fmt::format("rank {} could not allocate or export its buffers", r);
      return verdict;
    }
    if (record.status == RankStatus::NoBoard) {
      verdict.unexpected = true;
      verdict.reason = fmt::format("rank {} could not create its release board (System V shared memory)", r);
      return verdict;
    }
    if (record.status == RankStatus::Failed) {
      verdict.unexpected = true;
      verdict.reason = fmt::format("rank {} failed before the set-up's exchange (its log says why)", r);
      return verdict;
    }
    if (record.status == RankStatus::NoRoom) {  // the user's own bound: not a fault
      verdict.reason = fmt::format("rank {} has no room for another buffer block within its NCCL_CAR_GPU_MEMORY_BYTES", r);
      return verdict;
    }
    if (record.status != RankStatus::Ready) {
      verdict.unexpected = true;
      verdict.reason = fmt::format("rank {} cannot use CUDA", r);
      return verdict;
    }
    hosts.insert(fieldText(record.host));
  }
  if (hosts.size() > 1) {
    verdict.reason = fmt::format("ranks span {} hosts", hosts.size());
    return verdict;
  }
  for (int r = 1; r < ranks; ++r) {
    if (const char* variable = firstDifferingVariable(records[0].settings, records[r].settings)) {
      verdict.differingVariable = variable;
      verdict.unexpected = true;
      verdict.reason = fmt::format("{} differs between rank 0 and rank {}", variable, r);
      return verdict;
    }
  }
  for (int r = 0; r < ranks; ++r) {
    if (static_cast<P2pLimit>(records[r].p2pLimit) != P2pLimit::Off) continue;
    verdict.reason = fmt::format("NCCL_P2P_DISABLE or NCCL_P2P_LEVEL turns peer-to-peer access off on rank {}", r);
    return verdict;
  }
  verdict.computeCapability = records[0].computeCapability;
  for (int r = 1; r < ranks; ++r) {
    if (records[r].computeCapability != verdict.computeCapability) verdict.computeCapability = 0;
  }
  verdict.allSameProcess = true;
  for (int r = 1; r < ranks; ++r) {
    if (sameProcess(records[0], records[r])) continue;
    verdict.allSameProcess = false;
  }
  for (int a = 0; a < ranks; ++a) {
    for (int b = a + 1; b < ranks; ++b) {
      if (!sameProcess(records[a], records[b]) && records[a].ipcNamespace != records[b].ipcNamespace) {
        verdict.unexpected = true;
        verdict.reason = fmt::format("rank {} and rank {} are in different IPC namespaces "
                                     "(containers need a shared IPC namespace)", a, b);
        return verdict;
      }
    }
  }
  if (const std::optional<int> rank = processOnSeveralGpusWithIpcPeers(records)) {
    verdict.reason = fmt::format("the process of rank {} drives several GPUs and has peers in other processes "
                                 "(nccl-tests -g N under MPI): CUDA IPC mappings are not shared across its GPUs here",
                                 *rank);
    return verdict;
  }
  verdict.eligible = true;
  return verdict;
}

std::optional<int> processOnSeveralGpusWithIpcPeers(const std::vector<HandshakeRecord>& records) {
  const int ranks = static_cast<int>(records.size());
  for (int a = 0; a < ranks; ++a) {
    bool severalGpus = false;
    bool ipcPeer = false;
    for (int b = 0; b < ranks; ++b) {
      if (!sameProcess(records[a], records[b])) {
        ipcPeer = true;
      } else if (fieldText(records[a].busId) != fieldText(records[b].busId)) {
        severalGpus = true;
      }
    }
    if (severalGpus && ipcPeer) return a;
  }
  return std::nullopt;
}

Verdict judgeLinks(const std::vector<HandshakeRecord>& records, const std::vector<LinkReport>& reports) {
  Verdict verdict = judgeRecords(records);
  if (!verdict.eligible) return verdict;
  verdict.eligible = false;
  const int ranks = static_cast<int>(records.size());
  if (static_cast<int>(reports.size()) != ranks) {
    verdict.reason = "link reports missing";
    return verdict;
  }
  for (int r = 0; r < ranks; ++r) {
    if (reports[r].magic != kHandshakeMagic || reports[r].mapped == 0) {
      verdict.unexpected = true;
      verdict.reason = fmt::format("rank {} could not map its peers' buffers: {}", r,
                                   fieldText(reports[r].problem));
      return verdict;
    }
  }
  verdict.fullNvlink = true;
  for (int a = 0; a < ranks; ++a) {
    for (int b = 0; b < ranks; ++b) {
      if (a == b) continue;
      const bool reach = (reports[a].p2pMask >> b & 1u) && (reports[b].p2pMask >> a & 1u);
      if (!reach) {
        verdict.reason = fmt::format("no peer-to-peer access between rank {} and rank {}", a, b);
        return verdict;
      }
      if (!bothWays(reports, a, b, &LinkReport::nvlinkMask)) verdict.fullNvlink = false;
    }
  }
  if (verdict.fullNvlink) {
    verdict.eligible = true;
    return verdict;
  }
  // The PCIe case: NCCL's settings, the most restrictive rank's for all, must allow the path
  // of every pair without NVLink, and NVML must confirm what CUDA says about each such pair.
  P2pLimit limit = static_cast<P2pLimit>(records[0].p2pLimit);
  int limitRank = 0;
  for (int r = 1; r < ranks; ++r) {
    const P2pLimit own = static_cast<P2pLimit>(records[r].p2pLimit);
    if (stricterP2pLimit(limit, own) != limit) limit = own, limitRank = r;
  }
  if (limit == P2pLimit::NvlinkOnly) {
    verdict.reason = fmt::format("NCCL_P2P_LEVEL on rank {} allows peer-to-peer access over NVLink only, "
                                 "and not every pair of ranks has NVLink", limitRank);
    return verdict;
  }
  for (int a = 0; a < ranks; ++a) {
    for (int b = a + 1; b < ranks; ++b) {
      if (bothWays(reports, a, b, &LinkReport::nvlinkMask)) {
        ++verdict.nvlinkPairs;
        continue;
      }
      const PciePath path = std::max(static_cast<PciePath>(reports[a].pciePath[b]),
                                     static_cast<PciePath>(reports[b].pciePath[a]));
      const bool nvmlAgrees = bothWays(reports, a, b, &LinkReport::nvmlWriteMask);
      const bool known = static_cast<PciePath>(reports[a].pciePath[b]) != PciePath::Unknown &&
                         static_cast<PciePath>(reports[b].pciePath[a]) != PciePath::Unknown;
      if (!nvmlAgrees || !known) {
        for (int r : {a, b}) {
          if (reports[r].nvmlMissing == 0) continue;
          // Not a topology we do not serve but one we cannot see: worth a WARN.
          verdict.unexpected = true;
          verdict.reason = fmt::format("rank {} cannot load NVML (libnvidia-ml.so.1), so NVLink and the PCIe path "
                                       "between its GPU and the others are unknown", r);
          return verdict;
        }
      }
      if (!nvmlAgrees) {
        verdict.reason = fmt::format("CUDA allows peer-to-peer access between rank {} and rank {} over PCIe, but NVML "
                                     "reports no peer-to-peer writes between their GPUs", a, b);
        return verdict;
      }
      if (!known) {
        verdict.unexpected = true;
        verdict.reason = fmt::format("NVML cannot tell the PCIe path between the GPUs of rank {} and rank {}", a, b);
        return verdict;
      }
      if (!p2pLimitAllows(limit, path)) {
        verdict.reason = path == PciePath::Sys && limit == P2pLimit::None
                             ? fmt::format("rank {} and rank {} are on different CPU sockets (PCIe path SYS); "
                                           "NCCL_P2P_LEVEL=SYS would allow peer-to-peer access across them", a, b)
                             : fmt::format("{} on rank {} does not allow the PCIe path {} between rank {} and rank {}",
                                           p2pLimitText(limit), limitRank, pciePathName(path), a, b);
        return verdict;
      }
      verdict.longestPath = std::max(verdict.longestPath, path);
    }
  }
  verdict.eligible = true;
  return verdict;
}

Verdict judgeTuning(Verdict verdict, const std::vector<HandshakeRecord>& records, const ChoiceTable* table) {
  const int ranks = static_cast<int>(records.size());
  if (!verdict.eligible || verdict.fullNvlink || records.empty()) return verdict;
  if (table != nullptr && table->measured(ranks, Links::Pcie)) return verdict;
  if (forcesPushKernel(records[0].settings)) return verdict;
  verdict.eligible = false;
  verdict.forwardAs = ForwardReason::Untuned;
  verdict.reason = logText(formatPcieUntuned, verdict.allSameProcess, linksText(verdict, ranks).c_str(),
                           verdict.computeCapability, ranks);
  return verdict;
}

std::string linksText(const Verdict& verdict, int ranks) {
  return logText(formatLinks, verdict.fullNvlink, pciePathName(verdict.longestPath), verdict.nvlinkPairs,
                 ranks * (ranks - 1) / 2);
}

std::string tuningNote(const Verdict& verdict, int ranks, const ChoiceTable* table, std::optional<Algorithm> forced) {
  if (verdict.fullNvlink) return "";
  const bool measured = table != nullptr && table->measured(ranks, Links::Pcie);
  return logText(formatPcieTuning, ranks, measured, forced ? algorithmName(*forced) : nullptr);
}

}  // namespace car
