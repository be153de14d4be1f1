#include "policy.h"

#include "../kernels/rank_signal.h"

namespace car {
namespace {

// Seed thresholds, in bytes: 1stage reads the whole message from every rank, so its cost
// grows with ranks x bytes; below these sizes its two barriers still beat 2stage's three.
constexpr std::size_t kOneStageBelowUpTo4Ranks = 512 * 1024;
constexpr std::size_t kOneStageBelowUpTo8Ranks = 256 * 1024;

// Measured on 4 H200s with NVLink (2026-11-29, docs/benchmarks.md): 1stage took 10.5 us at
// 512 KiB against 11.9 us for 2stage, and 15.7 against 13.7 us at 1 MiB; the lines cross
// near 720 KiB.
constexpr int kHopper = 90;
constexpr std::size_t kHopperOneStageBelowUpTo4Ranks = 768 * 1024;

}  // namespace

const char* forwardReasonName(ForwardReason reason) {
  switch (reason) {
    case ForwardReason::Disabled: return "disabled";
    case ForwardReason::NotEligible: return "ineligible-comm";
    case ForwardReason::NotReady: return "comm-not-ready";
    case ForwardReason::Op: return "op";
    case ForwardReason::Type: return "type";
    case ForwardReason::Empty: return "empty";
    case ForwardReason::NotMultipleOf16: return "size-not-16B-multiple";
    case ForwardReason::TooLarge: return "too-large";
    case ForwardReason::Misaligned: return "misaligned";
    case ForwardReason::Failed: return "failed";
    case ForwardReason::kCount: break;
  }
  return "?";
}

std::optional<Algorithm> seedAlgorithm(int ranks, bool fullNvlink, std::size_t bytes) {
  if (ranks < 2 || ranks > kMaxRanks) return std::nullopt;
  if (ranks == 2) return Algorithm::OneStage;
  if (!fullNvlink) return std::nullopt;
  if (ranks <= 4 && bytes < kOneStageBelowUpTo4Ranks) return Algorithm::OneStage;
  if (bytes < kOneStageBelowUpTo8Ranks) return Algorithm::OneStage;
  return Algorithm::TwoStage;
}

std::optional<Algorithm> defaultAlgorithm(const CommunicatorFacts& comm, std::size_t bytes) {
  std::optional<Algorithm> seed = seedAlgorithm(comm.ranks, comm.fullNvlink, bytes);
  if (!seed) return seed;
  if (comm.computeCapability == kHopper && comm.ranks > 2 && comm.ranks <= 4) {
    return bytes < kHopperOneStageBelowUpTo4Ranks ? Algorithm::OneStage : Algorithm::TwoStage;
  }
  return seed;
}

std::optional<Algorithm> chooseAlgorithm(const CommunicatorFacts& comm, std::size_t bytes,
                                         const Config& config) {
  std::optional<Algorithm> chosen = defaultAlgorithm(comm, bytes);
  if (!chosen) return std::nullopt;  // the override cannot make an unsupported topology ours
  if (config.algorithm == AlgorithmOverride::OneStage) return Algorithm::OneStage;
  if (config.algorithm == AlgorithmOverride::TwoStage) return Algorithm::TwoStage;
  return chosen;
}

CallDecision decideCall(const CommunicatorFacts& comm, const CallFacts& call, const Config& config) {
  CallDecision decision;
  auto forward = [&decision](ForwardReason reason) {
    decision.ours = false;
    decision.reason = reason;
    return decision;
  };
  if (config.disable) return forward(ForwardReason::Disabled);
  if (!call.opIsSum) return forward(ForwardReason::Op);
  if (!call.type) return forward(ForwardReason::Type);
  if (call.count == 0) return forward(ForwardReason::Empty);
  const std::size_t elementSize = static_cast<std::size_t>(elementBytes(*call.type));
  if (call.count > config.maxBytes / elementSize) return forward(ForwardReason::TooLarge);
  decision.bytes = call.count * elementSize;
  if (decision.bytes % kPackBytes != 0) return forward(ForwardReason::NotMultipleOf16);
  // Only the output must be 16-byte aligned: the kernel stores whole packs there. Any input
  // is copied into our aligned staging (by the copy engine when it is not aligned), and every
  // per-rank fact in this rule is one more way for ranks to disagree.
  if (call.recvAddress % kPackBytes != 0) return forward(ForwardReason::Misaligned);
  std::optional<Algorithm> algorithm = chooseAlgorithm(comm, decision.bytes, config);
  if (!algorithm) return forward(ForwardReason::NotEligible);
  decision.ours = true;
  decision.algorithm = *algorithm;
  return decision;
}

}  // namespace car
