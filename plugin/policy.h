// "Is this all-reduce ours, and which kernel runs it?" as a pure function of plain facts.
// No CUDA and no NCCL in here, so the CPU tests can cover every row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "../kernels/all_reduce.h"
#include "config.h"

namespace car {

// Why a call went to NCCL. Also the index of the per-reason counters.
enum class ForwardReason {
  Disabled,         // NCCL_CAR_DISABLE=1
  NotEligible,      // the communicator failed setup or its checks (hosts, P2P, NVLink, ...)
  NotReady,         // a nonblocking communicator still initialising
  Op,               // not ncclSum
  Type,             // not fp16, bf16 or fp32
  Empty,            // zero elements
  NotMultipleOf16,  // bytes not a multiple of 16
  TooLarge,         // above NCCL_CAR_MAX_BYTES
  Misaligned,       // the receive pointer not 16-byte aligned
  Failed,           // our launch failed; the communicator is now disabled
  kCount,
};

const char* forwardReasonName(ForwardReason reason);

struct CommunicatorFacts {
  int ranks = 0;
  bool fullNvlink = false;  // every pair NVLink-connected (same-GPU pairs count as connected)
  // major * 10 + minor of every rank's GPU (90: H100/H200); 0 when unknown or when the
  // ranks' GPUs differ. Picks the tuned thresholds; the seed's apply to the rest.
  int computeCapability = 0;
};

struct CallFacts {
  std::optional<ElementType> type;  // nullopt: a type we have no kernel for
  bool opIsSum = false;
  std::size_t count = 0;  // elements
  std::uintptr_t sendAddress = 0;
  std::uintptr_t recvAddress = 0;
};

// The seed's rule (tuned on A100-class GPUs): 2 ranks always 1stage; with full NVLink,
// 1stage below 512 KiB up to 4 ranks and below 256 KiB up to 8; otherwise 2stage. More than
// 2 ranks without full NVLink has no kernel here: nullopt, the caller forwards.
std::optional<Algorithm> seedAlgorithm(int ranks, bool fullNvlink, std::size_t bytes);

// The default: seedAlgorithm, except where another switch point was measured to be faster
// on this GPU architecture (docs/benchmarks.md). On sm_90 (H100/H200), 3 and 4 ranks keep
// 1stage below 768 KiB instead of 512 KiB.
std::optional<Algorithm> defaultAlgorithm(const CommunicatorFacts& comm, std::size_t bytes);

// defaultAlgorithm with the NCCL_CAR_ALGO override applied.
std::optional<Algorithm> chooseAlgorithm(const CommunicatorFacts& comm, std::size_t bytes,
                                         const Config& config);

struct CallDecision {
  bool ours = false;
  Algorithm algorithm = Algorithm::OneStage;
  ForwardReason reason = ForwardReason::Disabled;  // meaningful when !ours
  std::size_t bytes = 0;
};

// Checks an all-reduce against the rule in DESIGN.md ("Which all-reduce is ours"). Every
// input is the same on every rank for the same call, so every rank decides the same way.
CallDecision decideCall(const CommunicatorFacts& comm, const CallFacts& call, const Config& config);

}  // namespace car
