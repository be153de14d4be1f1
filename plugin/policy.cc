#include "policy.h"

#include <algorithm>

#include "../kernels/geometry.h"
#include "../kernels/rank_signal.h"
#include "choice_table.h"

namespace car {
namespace {

// Seed thresholds, in bytes: 1stage reads the whole message from every rank, so its cost
// grows with ranks x bytes; below these sizes its two barriers still beat 2stage's three.
constexpr std::size_t kOneStageBelowUpTo4Ranks = 512 * 1024;
constexpr std::size_t kOneStageBelowUpTo8Ranks = 256 * 1024;

// On sm_90 with NVLink, 1stage's cost (ranks x bytes read) meets 2stage's third barrier
// later than the seed assumed: 3 and 4 ranks keep 1stage up to a round size just past where
// the two cross (docs/benchmarks.md, "Pull kernels: 1stage against 2stage").
constexpr int kHopper = 90;
constexpr std::size_t kHopperOneStageBelowUpTo4Ranks = 768 * 1024;

// 1shot sends (ranks - 1) x the message from every rank, 2shot about 2 x (ranks - 1) / ranks x
// but waits twice: 1shot up to where 2shot's fewer bytes repay its second wait. Index: world
// size. 2 ranks: where the measured lines cross; 3 to 8 ranks: estimates from that model
// (docs/benchmarks.md, "The choice: 1shot against 2shot").
constexpr std::size_t kOneShotUpTo[kMaxRanks + 1] = {
    0, 0,
    2048 * 1024,  // 2 ranks
    512 * 1024,   // 3
    256 * 1024,   // 4
    128 * 1024,   // 5
    128 * 1024,   // 6
    128 * 1024,   // 7
    128 * 1024,   // 8
};

// Types whose packs travel split (integers, fp64) put twice the bytes on the wire, so each
// kernel gives way sooner: 1shot up to a sixteenth of the floating types' limit, 2shot up to
// 2 MiB, and NCCL above, where it is the faster (docs/benchmarks.md, "Split types: where
// 1shot, 2shot and NCCL take over").
constexpr int kSplitOneShotShare = 16;
constexpr std::size_t kSplitPushUpTo = 2048 * 1024;

// The PCIe case (!fullNvlink) is served by the push kernels alone, and only where measured.
bool overPcie(const CommunicatorFacts& comm) { return !comm.fullNvlink; }

AlgorithmChoice none(ForwardReason reason) { return AlgorithmChoice{std::nullopt, reason}; }

}  // namespace

const char* forwardReasonName(ForwardReason reason) {
  switch (reason) {
    case ForwardReason::NotEligible: return "ineligible-comm";
    case ForwardReason::NotReady: return "comm-not-ready";
    case ForwardReason::Op: return "op";
    case ForwardReason::Type: return "type";
    case ForwardReason::Empty: return "empty";
    case ForwardReason::TooLarge: return "too-large";
    case ForwardReason::SymmetricWindow: return "symmetric-window";
    case ForwardReason::Failed: return "failed";
    case ForwardReason::Requested: return "requested";
    case ForwardReason::NonblockingGroup: return "nonblocking-group";
    case ForwardReason::Tuned: return "tuned";
    case ForwardReason::PointerCheck: return "pointer-check";
    case ForwardReason::Untuned: return "untuned";
    case ForwardReason::kCount: break;
  }
  return "?";
}

std::optional<Algorithm> seedAlgorithm(int ranks, bool fullNvlink, std::size_t bytes) {
  if (!takesWorldSize(ranks)) return std::nullopt;
  if (ranks == 2) return Algorithm::OneStage;
  if (!fullNvlink) return std::nullopt;
  if (ranks <= 4 && bytes < kOneStageBelowUpTo4Ranks) return Algorithm::OneStage;
  if (bytes < kOneStageBelowUpTo8Ranks) return Algorithm::OneStage;
  return Algorithm::TwoStage;
}

std::optional<Algorithm> pullAlgorithm(const CommunicatorFacts& comm, std::size_t bytes) {
  if (overPcie(comm)) return std::nullopt;
  std::optional<Algorithm> seed = seedAlgorithm(comm.ranks, comm.fullNvlink, bytes);
  if (!seed) return seed;
  if (comm.computeCapability == kHopper && comm.ranks > 2 && comm.ranks <= 4) {
    return bytes < kHopperOneStageBelowUpTo4Ranks ? Algorithm::OneStage : Algorithm::TwoStage;
  }
  return seed;
}

std::size_t oneShotLimit(const CommunicatorFacts& comm) {
  return takesWorldSize(comm.ranks) ? kOneShotUpTo[comm.ranks] : 0;
}

bool canRun(Algorithm algorithm, const CommunicatorFacts& comm, std::size_t bytes, const Config& config,
            int wirePacks) {
  if (!takesWorldSize(comm.ranks) || bytes == 0) return false;
  const AlgorithmSpec& spec = specOf(algorithm);
  if (spec.family == KernelFamily::Pull) return !overPcie(comm) && bytes <= pullBufferBytes(config);
  if (serves(algorithm, Collective::AllReduce) && bytes > config.pushMaxBytes) return false;
  const std::size_t use = spec.areaUse(packsOf(static_cast<long long>(bytes)), comm.ranks);
  return use * static_cast<std::size_t>(wirePacks) <= pushAreaBytesFor(config.pushMaxBytes);
}

bool pullKernelsReachable(const Config& config) {
  return (config.algorithm && !isPush(*config.algorithm)) || config.pushMaxBytes < config.maxBytes;
}

std::size_t pullBufferBytes(const Config& config) { return pullKernelsReachable(config) ? config.maxBytes : 0; }

AlgorithmChoice defaultAlgorithm(const CommunicatorFacts& comm, std::size_t bytes, const Config& config,
                                 int wirePacks) {
  if (!takesWorldSize(comm.ranks)) return none(ForwardReason::NotEligible);
  if (overPcie(comm)) return none(ForwardReason::Untuned);  // no built-in sizes: measured or not taken
  const bool split = wirePacks > 1;
  const std::size_t oneShotUpTo = split ? oneShotLimit(comm) / kSplitOneShotShare : oneShotLimit(comm);
  if (bytes <= oneShotUpTo && canRun(Algorithm::OneShotPush, comm, bytes, config, wirePacks)) {
    return AlgorithmChoice{Algorithm::OneShotPush, ForwardReason::NotEligible};
  }
  if ((!split || bytes <= kSplitPushUpTo) && canRun(Algorithm::TwoShotPush, comm, bytes, config, wirePacks)) {
    return AlgorithmChoice{Algorithm::TwoShotPush, ForwardReason::NotEligible};
  }
  const std::optional<Algorithm> pull = pullAlgorithm(comm, bytes);
  if (pull && canRun(*pull, comm, bytes, config, wirePacks)) return AlgorithmChoice{pull, ForwardReason::NotEligible};
  // Only a type that travels split gets here by default: above kSplitPushUpTo NCCL is faster
  // than its push kernels, and the pull kernels have no buffers unless NCCL_CAR_PUSH_MAX_BYTES
  // was lowered.
  return none(ForwardReason::TooLarge);
}

AlgorithmChoice chooseAlgorithm(const CommunicatorFacts& comm, std::size_t bytes, const Config& config,
                                int wirePacks, std::optional<Algorithm> requested) {
  auto takes = [&](std::optional<Algorithm> algorithm) {
    return algorithm && serves(*algorithm, Collective::AllReduce) && canRun(*algorithm, comm, bytes, config, wirePacks);
  };
  if (takes(requested)) return AlgorithmChoice{requested, ForwardReason::NotEligible};
  if (takes(config.algorithm)) {
    return AlgorithmChoice{config.algorithm, ForwardReason::NotEligible};
  }
  return defaultAlgorithm(comm, bytes, config, wirePacks);
}

AlgorithmChoice keepInvariant(const CommunicatorFacts& comm, ElementType type, std::size_t bytes, const Config& config,
                              AlgorithmChoice choice) {
  if (!config.deterministic || choice.algorithm || choice.reason != ForwardReason::TooLarge) return choice;
  if (type != ElementType::Float64) return choice;
  if (!canRun(Algorithm::TwoShotPush, comm, bytes, config, wirePacksPerPack(type))) return choice;
  return AlgorithmChoice{Algorithm::TwoShotPush, ForwardReason::NotEligible};
}

bool invariantOnNccl(std::optional<ElementType> type) { return type && isInteger(*type); }

std::size_t collectiveMaxBytes(Collective collective, const Config& config) {
  switch (collective) {
    case Collective::AllReduce: return config.maxBytes;
    case Collective::AllGather: return config.allGatherMaxBytes;
    case Collective::ReduceScatter: return config.reduceScatterMaxBytes;
    case Collective::kCount: break;
  }
  return 0;
}

namespace {

// The kernel of a collective other than the all-reduce: each has one, a push kernel.
AlgorithmChoice chooseMover(Collective collective, const CommunicatorFacts& comm, std::size_t bytes,
                            const Config& config, ElementType type) {
  if (!takesWorldSize(comm.ranks)) return none(ForwardReason::NotEligible);
  const Algorithm kernel =
      collective == Collective::AllGather ? Algorithm::AllGatherPush : Algorithm::ReduceScatterPush;
  if (!canRun(kernel, comm, bytes, config, wirePacksOf(kernel, type))) return none(ForwardReason::TooLarge);
  return AlgorithmChoice{kernel, ForwardReason::NotEligible};
}

}  // namespace

CallPlan planCall(const CommunicatorFacts& comm, const CallFacts& call, const Config& config) {
  CallPlan plan;
  auto forward = [&plan](ForwardReason reason) {
    plan.ours = false;
    plan.reason = reason;
    return plan;
  };
  const bool allReduce = call.collective == Collective::AllReduce;
  if (call.ncclRequested) return forward(ForwardReason::Requested);
  if (reduces(call.collective) && !call.op) return forward(ForwardReason::Op);
  if (!call.type) return forward(ForwardReason::Type);
  // NCCL takes fp8 only where every rank's GPU is sm_90 or newer, and fails the call
  // elsewhere: the call must fail with the library as without it.
  if (isFp8(*call.type) && comm.computeCapability < kHopper) return forward(ForwardReason::Type);
  if (call.count == 0) return forward(ForwardReason::Empty);
  const std::size_t elementSize = static_cast<std::size_t>(elementBytes(*call.type));
  // All-gather and reduce-scatter: `count` is one rank's part; their limit is on all parts.
  const std::size_t parts = allReduce ? 1 : static_cast<std::size_t>(std::max(comm.ranks, 1));
  if (call.count > collectiveMaxBytes(call.collective, config) / elementSize / parts) {
    return forward(ForwardReason::TooLarge);
  }
  plan.bytes = call.count * elementSize;
  // NCCL's symmetric kernels promise no invariance: NCCL_CAR_DETERMINISTIC keeps these calls.
  if (allReduce && call.symmetricBuffers && plan.bytes <= config.symmetricNcclBytes && !config.deterministic) {
    return forward(ForwardReason::SymmetricWindow);
  }
  // The table measured here for this case, where the caller asked for no kernel itself.
  std::optional<Algorithm> preferred = call.requestedAlgorithm;
  if (!preferred && !(allReduce && config.algorithm)) {
    const ChoiceRow* row =
        config.table ? config.table->find(call.collective, comm.ranks, linksOf(comm), *call.type, plan.bytes * parts)
                     : nullptr;
    // NCCL_CAR_DETERMINISTIC keeps ours what a table gives NCCL for speed, on the built-in
    // choice: the PCIe case has none, so there the row stands.
    const bool keepOurs =
        config.deterministic && reduces(call.collective) && !invariantOnNccl(call.type) && !overPcie(comm);
    if (row != nullptr && !row->kernel && !keepOurs) return forward(ForwardReason::Tuned);
    if (row != nullptr) preferred = row->kernel;
    // No built-in sizes over PCIe: measured on this machine, or not taken.
    if (overPcie(comm) && !preferred) return forward(ForwardReason::Untuned);
  }
  AlgorithmChoice choice;
  if (allReduce) {
    choice = keepInvariant(comm, *call.type, plan.bytes, config,
                           chooseAlgorithm(comm, plan.bytes, config, wirePacksPerPack(*call.type), preferred));
  } else if (overPcie(comm) && !(preferred && serves(*preferred, call.collective))) {
    choice = none(ForwardReason::Untuned);  // over PCIe a mover runs where a row, or the call, names its kernel
  } else {
    choice = chooseMover(call.collective, comm, plan.bytes, config, *call.type);
  }
  if (!choice.algorithm) return forward(choice.reason);
  plan.ours = true;
  plan.algorithm = *choice.algorithm;
  const int wirePacks = wirePacksOf(plan.algorithm, *call.type);
  plan.packs = packsOf(static_cast<long long>(plan.bytes));
  const AlgorithmSpec& spec = specOf(plan.algorithm);
  if (spec.family == KernelFamily::Pull) {
    plan.blocks = gridBlocks(plan.packs, std::min(config.maxBlocks, kMaxBlocks));
    plan.threads = kThreadsPerBlock;
    return plan;
  }
  // A push kernel's grid is its own rank's business (geometry.h); split packs use fewer blocks.
  const long long work = spec.shardedWork ? twoShotShardPacks(plan.packs, comm.ranks) : plan.packs;
  int blockLimit = std::min(config.maxBlocks, pushBlockLimit(wirePacks));
  if (call.maxBlocks > 0) blockLimit = std::min(blockLimit, call.maxBlocks);
  plan.blocks = pushGridBlocks(work, spec.shardedWork, blockLimit);
  plan.threads = pushBlockThreads(work, spec.shardedWork, plan.blocks);
  return plan;
}

Staging stagingFor(const CallPlan& plan, bool inputPackAligned, bool capturing, const Config& config) {
  if (isPush(plan.algorithm)) return Staging::None;
  const bool wholePacks = plan.bytes % kPackBytes == 0;
  return !capturing && inputPackAligned && wholePacks && plan.bytes <= config.copyInKernelBytes ? Staging::InKernel
                                                                                                : Staging::CopyEngine;
}

}  // namespace car
