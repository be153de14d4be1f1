// "Is this all-reduce ours, which kernel runs it, on what grid?" as a pure function of plain
// facts: the call's plan. No CUDA and no NCCL in here, so the CPU tests can cover every row.
// No pointer is among the facts: every input is the same on every rank for the same call, so
// every rank decides the same way (docs/design.md, "Why every rank decides the same way").
// Only stagingFor reads a rank's own facts, and they change how it moves its bytes, never
// whether a call is ours or which kernel runs it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "../kernels/all_reduce.h"
#include "choice_table.h"
#include "config.h"

namespace car {

// Why a call went to NCCL. Also the index of the per-reason counters.
enum class ForwardReason {
  NotEligible,      // the communicator failed setup or its checks (hosts, P2P, NVLink, ...)
  NotReady,         // a nonblocking communicator still initialising
  Op,               // an op made by ncclRedOpCreatePreMulSum (or out of range)
  Type,             // a type NCCL does not define (out of range), or fp8 below sm_90 (NCCL refuses it)
  Empty,            // zero elements
  TooLarge,         // above NCCL_CAR_MAX_BYTES, or above what any kernel has room for
  SymmetricWindow,  // both buffers in NCCL symmetric windows, at most NCCL_CAR_SYMMETRIC_NCCL_BYTES
  Failed,           // our launch failed; the communicator is now disabled
  Requested,        // the call asked for NCCL (ncclAllReduceConfig: NCCL's algorithms forced, our option
                    // "nccl", or a config only NCCL can judge)
  NonblockingGroup, // inside a group, on a nonblocking communicator: NCCL launches the group from its own
                    // thread after the end, so ours could not be ordered alike on every rank
  Tuned,            // the choice table measured on this machine gives NCCL this size (plugin/choice_table.h)
  PointerCheck,     // NCCL checks pointers (shim/exports/pointer_check.h) and refuses a buffer: NCCL answers
  Untuned,          // a PCIe communicator's call that no row measured on this machine gives to a kernel of ours
  kCount,
};

const char* forwardReasonName(ForwardReason reason);

struct CommunicatorFacts {
  int ranks = 0;
  // Every pair NVLink-connected (same-GPU pairs count as connected): the NVLink case, with the
  // built-in rule. False is the PCIe case: every pair peer-to-peer, not all over NVLink (the
  // verdict admits no other, shim/handshake/verdict.h), with no built-in sizes: only the push
  // kernels, only where a choice table measured on this machine for PCIe says so (Untuned).
  bool fullNvlink = false;
  // major * 10 + minor of every rank's GPU (90: H100/H200); 0 when unknown or when the
  // ranks' GPUs differ. Picks the tuned thresholds; the seed's apply to the rest.
  int computeCapability = 0;
};

// Which case a communicator is, as the choice table's rows name it (plugin/choice_table.h).
inline Links linksOf(const CommunicatorFacts& comm) { return comm.fullNvlink ? Links::NvLink : Links::Pcie; }

// One call as every rank of the communicator sees it: all that decides whether a kernel of
// ours takes it, which one and on what grid. ncclAllReduceConfig's per-call settings, which
// NCCL requires to be the same on every rank, are among them.
struct CallFacts {
  Collective collective = Collective::AllReduce;
  std::optional<ElementType> type;  // nullopt: a type we have no kernel for
  std::optional<ReduceOp> op;       // nullopt: an op we have no kernel for (not read for an all-gather)
  std::size_t count = 0;  // elements: NCCL's count (algorithms.h, Collective)
  // Both buffers lie in windows registered with NCCL_WIN_COLL_SYMMETRIC. Read off this rank's
  // pointers, but shared by NCCL's own contract: windows are registered collectively, and
  // NCCL's symmetric kernels need every rank to pass window buffers.
  bool symmetricBuffers = false;
  // ncclAllReduceConfig's: NCCL asked for (forwarded as Requested); a kernel of ours asked for
  // (taken before NCCL_CAR_ALGO's, where it can run the call); maxCTAs, the most blocks a push
  // kernel may use (0: no bound). A pull kernel's grid must be the same on every rank whatever
  // a rank passes, so the bound does not shape it (those kernels use at most 36 blocks).
  bool ncclRequested = false;
  std::optional<Algorithm> requestedAlgorithm;
  int maxBlocks = 0;
};

// ---- Pull kernels (1stage, 2stage): the seed's rule and its re-measured points --------

// The seed's rule (tuned on A100-class GPUs): 2 ranks always 1stage; with full NVLink,
// 1stage below 512 KiB up to 4 ranks and below 256 KiB up to 8; otherwise 2stage. More than
// 2 ranks without full NVLink has no kernel here: nullopt, the caller forwards.
std::optional<Algorithm> seedAlgorithm(int ranks, bool fullNvlink, std::size_t bytes);

// seedAlgorithm, except where another switch point was measured to be faster on this GPU
// architecture (docs/benchmarks.md). On sm_90 (H100/H200), 3 and 4 ranks keep 1stage below
// 768 KiB instead of 512 KiB. Never a pull kernel over PCIe (nullopt): their peer reads and
// barriers were never shown to work there (docs/design.md, "Over PCIe").
std::optional<Algorithm> pullAlgorithm(const CommunicatorFacts& comm, std::size_t bytes);

// ---- Push kernels (1shot, 2shot) --------------------------------------------------------

// Largest message 1shot takes by default with `ranks` ranks (then 2shot up to
// NCCL_CAR_PUSH_MAX_BYTES): the table of docs/benchmarks.md, "The choice".
std::size_t oneShotLimit(const CommunicatorFacts& comm);

// Whether `algorithm` can run a message of `bytes` bytes at all on this communicator with
// these settings (pull kernels: within their buffers, with NVLink between every pair; push
// kernels: within the area, where each pack takes `wirePacks` packs, see wirePacksOf, and for
// the all-reduce within NCCL_CAR_PUSH_MAX_BYTES). A message is what the kernel's
// LaunchArgs::bytes says: one rank's part for all-gather and reduce-scatter. Says nothing
// about speed.
bool canRun(Algorithm algorithm, const CommunicatorFacts& comm, std::size_t bytes, const Config& config,
            int wirePacks);

struct AlgorithmChoice {
  std::optional<Algorithm> algorithm;
  ForwardReason reason = ForwardReason::NotEligible;  // when no algorithm
};

// The default: push kernels up to NCCL_CAR_PUSH_MAX_BYTES (1shot up to oneShotLimit), the pull
// rule above that where the pull buffers exist; otherwise none (too-large). Types that travel
// split (wirePacks 2) have their own measured limits: 1shot up to a sixteenth of oneShotLimit,
// 2shot up to 2 MiB. World sizes outside 2..8: none. The PCIe case has no built-in sizes:
// none (Untuned).
AlgorithmChoice defaultAlgorithm(const CommunicatorFacts& comm, std::size_t bytes, const Config& config,
                                 int wirePacks);

// defaultAlgorithm, except that the kernel the call asks for (`requested`), else NCCL_CAR_ALGO's,
// is picked wherever that kernel serves the all-reduce and can run the call (neither can make
// an unsupported topology ours).
AlgorithmChoice chooseAlgorithm(const CommunicatorFacts& comm, std::size_t bytes, const Config& config,
                                int wirePacks, std::optional<Algorithm> requested = std::nullopt);

// Whether any call can reach a pull kernel with these settings: when NCCL_CAR_ALGO forces one,
// or when the push kernels stop below NCCL_CAR_MAX_BYTES. Otherwise the pull kernels' staging
// and tmp buffers (2 x NCCL_CAR_MAX_BYTES per rank) are not allocated at all.
bool pullKernelsReachable(const Config& config);

// Bytes of the pull kernels' staging (and of tmp) per rank: NCCL_CAR_MAX_BYTES or 0.
std::size_t pullBufferBytes(const Config& config);

// NCCL_CAR_DETERMINISTIC: a call that `choice` hands to NCCL for speed alone stays on a kernel
// of ours where one can run it, since NCCL promises no invariance. Such calls are those of
// fp64 above the split types' 2shot limit (integers are exact in any order: NCCL returns our
// bits). Any other choice is returned as it is.
AlgorithmChoice keepInvariant(const CommunicatorFacts& comm, ElementType type, std::size_t bytes, const Config& config,
                              AlgorithmChoice choice);

// Whether a call of `type` that goes to NCCL still gets the bits our kernels would give:
// integers only (exact in any order). Says where NCCL_CAR_DETERMINISTIC's promise ends.
bool invariantOnNccl(std::optional<ElementType> type);

// What a call becomes: forwarded, with the reason, or one kernel of ours on one grid. Built
// only by planCall, the one place that checks it: a plan that is ours fits the buffers its
// kernel goes through (the pull buffers, or one receive area) and the kernel's grid limits,
// so nothing after it checks again (tests/cpu/test_call_plan.cc holds every plan to that).
struct CallPlan {
  bool ours = false;
  ForwardReason reason = ForwardReason::NotEligible;  // meaningful when !ours
  Algorithm algorithm = Algorithm::OneStage;
  std::size_t bytes = 0;
  long long packs = 0;  // packsOf(bytes)
  // The grid (geometry.h). A pull kernel's is the same on every rank, as its barrier needs:
  // it follows from the call and the checked settings alone.
  int blocks = 0;
  int threads = 0;
};

// The largest call of `collective` taken, in bytes of the whole message (all-gather: the
// output; reduce-scatter: the input): NCCL_CAR_MAX_BYTES, NCCL_CAR_ALLGATHER_MAX_BYTES,
// NCCL_CAR_REDUCESCATTER_MAX_BYTES.
std::size_t collectiveMaxBytes(Collective collective, const Config& config);

// Checks a call against the rule in docs/design.md ("Which calls are ours") and plans its
// grid. Where config.table has a row for the call and the communicator's case (and neither
// the call nor NCCL_CAR_ALGO asks for a kernel), its winner replaces the built-in choice: a
// kernel of ours where it can run the call, or NCCL (Tuned; kept ours under
// NCCL_CAR_DETERMINISTIC where NCCL's bits could differ, in the NVLink case). In the PCIe case
// a call without such a row goes to NCCL (Untuned): there is no built-in choice to fall back on;
// a push kernel that NCCL_CAR_ALGO or the call asks for still runs it (how `nccl-car tune`
// measures them), a pull kernel never.
CallPlan planCall(const CommunicatorFacts& comm, const CallFacts& call, const Config& config);

// Who puts a pull kernel's input into this rank's staging: the rank's own choice, from its
// own pointer and stream (ranks that choose differently interoperate, see LaunchArgs::input),
// made once the plan is ours.
enum class Staging {
  None,        // a push kernel: it reads the caller's input itself, whatever its alignment
  InKernel,    // the pull kernel copies it itself: one launch instead of two
  CopyEngine,  // cudaMemcpyAsync into staging, then the kernel
};

// A small eager call copies its input inside the kernel (up to NCCL_CAR_COPY_IN_KERNEL_BYTES).
// In a graph the launches cost nothing and the copy engine's copy is the faster one. The
// kernel copies whole 16-byte packs, so an input that is not 16-byte aligned, or not a whole
// number of packs (the kernel must not read past the caller's buffer), takes the copy engine.
Staging stagingFor(const CallPlan& plan, bool inputPackAligned, bool capturing, const Config& config);

}  // namespace car
