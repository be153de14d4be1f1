// Eligibility of a communicator from the handshake tables: pure functions of data every
// rank holds identically, so every rank reaches the same verdict without a further vote.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "choice_table.h"
#include "handshake/handshake_record.h"
#include "policy.h"

namespace car {

struct Verdict {
  bool eligible = false;
  std::string reason;            // why not, for the log; empty when eligible
  // What the calls of a communicator this verdict refuses are counted as: ineligible-comm,
  // or untuned for the PCIe case that nothing measured (judgeTuning).
  ForwardReason forwardAs = ForwardReason::NotEligible;
  const char* differingVariable = nullptr;  // set when NCCL_CAR_* settings differ
  // A fault or a misconfiguration (buffers, mapping, settings, IPC namespace) rather than
  // a topology we simply do not serve (one host's worth of ranks, NVLink): worth a WARN.
  bool unexpected = false;
  // Every pair of ranks NVLink-connected (the same GPU counts). An eligible communicator
  // without it is the PCIe case: every pair peer-to-peer, some over PCIe (docs/design.md,
  // "The verdicts"), which the policy takes only where `nccl-car tune` measured it.
  bool fullNvlink = false;
  bool allSameProcess = false;
  int computeCapability = 0;  // of every rank's GPU; 0 when they differ
  // The PCIe case only: the longest PCIe path between two ranks, and how many of the pairs
  // of ranks have NVLink all the same.
  PciePath longestPath = PciePath::Unknown;
  int nvlinkPairs = 0;
};

// Why a communicator of `ranks` ranks is not ours (!takesWorldSize(ranks)).
std::string worldSizeRefusal(int ranks);

// Same process: same host, same pid namespace and same pid.
bool sameProcess(const HandshakeRecord& a, const HandshakeRecord& b);

// The first rank whose process holds ranks on several GPUs while other ranks live in other
// processes (nccl-tests -g N under MPI), or nullopt. Such a process would use one peer's
// CUDA IPC mapping from several GPUs, which CUDA does not make safe (it faulted with an
// illegal address in the first kernel): those communicators forward.
std::optional<int> processOnSeveralGpusWithIpcPeers(const std::vector<HandshakeRecord>& records);

// After the first all-gather: can we even try? (status, one host, same settings, IPC
// namespaces of peers in other processes). Also the GPUs' common compute capability.
Verdict judgeRecords(const std::vector<HandshakeRecord>& records);

// After the link reports: every rank mapped every peer and every pair can reach each other.
// NVLink between every pair is the NVLink case. Otherwise the PCIe case, for any 2 to 8 ranks,
// where each pair without NVLink must have NVML agree with CUDA on peer access (its P2P write
// status), a PCIe path NVML names, and NCCL's own settings allowing that path on every rank
// (no pair across CPU sockets without NCCL_P2P_LEVEL=SYS).
Verdict judgeLinks(const std::vector<HandshakeRecord>& records, const std::vector<LinkReport>& reports);

// After judgeLinks, for a communicator it found eligible: the PCIe case where nothing could
// run a call of ours (no row of the choice table measured its world size over PCIe, and
// NCCL_CAR_ALGO forces no push kernel) is not eligible, its calls counted as untuned, so that
// it lets go of everything at once instead of holding its block for calls that all go to
// NCCL. Its reason keeps the links found and names `nccl-car tune`. Every other verdict is
// returned as it is. Decided from shared facts alone: NCCL_CAR_ALGO as the records carry it
// and `table`, the choice table whose digest they carry (null: none), both the same on every
// rank once judgeRecords compared the settings.
Verdict judgeTuning(Verdict verdict, const std::vector<HandshakeRecord>& records, const ChoiceTable* table);

// The links of a communicator as its `setup:` line says them: "full nvlink", or
// "pcie (every pair peer-to-peer, PXB at most; NVLink on 2 of 6 pairs)".
std::string linksText(const Verdict& verdict, int ranks);

// What the `setup:` line of an eligible PCIe communicator of `ranks` ranks adds, under
// `table` (null: none) and NCCL_CAR_ALGO's `forced` kernel: that `nccl-car tune` measured
// that case here, or else which forced kernel made it eligible. Empty in the NVLink case.
std::string tuningNote(const Verdict& verdict, int ranks, const ChoiceTable* table, std::optional<Algorithm> forced);

}  // namespace car
