// Eligibility of a communicator from the handshake tables: pure functions of data every
// rank holds identically, so every rank reaches the same verdict without a further vote.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "handshake/handshake_record.h"

namespace car {

struct Verdict {
  bool eligible = false;
  std::string reason;            // why not, for the log; empty when eligible
  const char* differingVariable = nullptr;  // set when NCCL_CAR_* settings differ
  // A fault or a misconfiguration (buffers, mapping, settings, IPC namespace) rather than
  // a topology we simply do not serve (one host's worth of ranks, NVLink): worth a WARN.
  bool unexpected = false;
  bool fullNvlink = false;
  bool allSameProcess = false;
  int computeCapability = 0;  // of every rank's GPU; 0 when they differ
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

// After the second all-gather: every rank mapped every peer, every pair can reach each
// other, and NVLink connects every pair when there are more than 2 ranks.
Verdict judgeLinks(const std::vector<HandshakeRecord>& records, const std::vector<LinkReport>& reports);

}  // namespace car
