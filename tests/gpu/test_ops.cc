// Every built-in op (sum, prod, min, max, avg) on every NCCL type (int8 ... uint64, fp16, bf16,
// fp32, fp64, fp8 e4m3, fp8 e5m2), on every kernel, at every world size 2 to 8, against the
// host reference of host_data.h: integers bit-exact, floating types within one fp32
// accumulation and one rounding. Element counts 1, 3, 7 and 1001 always, the larger ones
// (up to 2 MiB, around the policy's switch points, 1 MiB) sampled: the whole cross product
// would take too long. Every call: in place or out of place, its buffers at byte offsets that
// differ from rank to rank, poison around the output, every rank's output bitwise identical,
// nothing outside the output written. Tags: [ops] all of it, [matrix] the sweeps ([1shot],
// [2shot], [1stage], [2stage] one kernel each), [thresholds], [special]; the hidden
// [sanitizer-ops] is compute-sanitizer's small share (tests/gpu/run-gpu-tests.sh).
#include <catch2/catch.hpp>

#include <set>

#include "op_runner.h"
#include "policy.h"
#include "sweep_log.h"

using namespace car;
using namespace car::testing;

namespace {

constexpr int kDevice = 0;
constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
// The largest message the sweeps send: the 1shot/2shot switch at 2 ranks (2 MiB) plus one element.
constexpr std::size_t kLargestMessage = 2 * MiB + 8;

int deviceCapability() { return computeCapability(kDevice); }

CommunicatorFacts facts(int ranks) { return CommunicatorFacts{ranks, true, deviceCapability()}; }

// Who copies a pull kernel's input into its staging: the engine's default (inside the kernel
// for eager calls up to 512 KiB with a 16-byte aligned input, else the copy engine), always
// the copy engine, or each way on alternate ranks.
enum class CopyMode { Default, CopyEngine, Alternating };

std::function<Config(int)> configsFor(Config base, CopyMode mode) {
  return [base, mode](int rank) {
    Config config = base;
    if (mode == CopyMode::CopyEngine || (mode == CopyMode::Alternating && rank % 2 == 1)) config.copyInKernelBytes = 0;
    if (mode == CopyMode::Alternating && rank % 2 == 0) config.copyInKernelBytes = kLargestMaxBytes;
    return config;
  };
}

const char* copyModeName(CopyMode mode) {
  switch (mode) {
    case CopyMode::Default: return "default-copy";
    case CopyMode::CopyEngine: return "copy-engine";
    case CopyMode::Alternating: return "alternating-copy";
  }
  return "?";
}

// Every kernel can run a call this small: 8 copies of it, split in two wire packs, fill a
// sixty-fourth of a push area at the default NCCL_CAR_PUSH_MAX_BYTES, which these sweeps keep.
constexpr std::size_t kAnyKernelBytes = 16 * KiB;

// The kernel a call forced onto `forced` must run on: the forced one wherever it can run (the
// pull kernels take any byte count up to NCCL_CAR_MAX_BYTES, the engine staging the input; a
// push kernel what its area holds, and every kernel kAnyKernelBytes), else the policy's own
// choice, which the forced kernel must not change. Never the policy's answer to the forced
// call itself: a force that was ignored would then pass. nullopt where the policy forwards it
// whatever is forced: fp8 below sm_90, which NCCL itself refuses (reason `type`,
// kExpectedForward).
std::optional<Algorithm> expectedKernel(Algorithm forced, int ranks, ElementType type, std::size_t bytes,
                                        const Config& config) {
  if (isFp8(type) && deviceCapability() < 90) return std::nullopt;
  const int wire = wirePacksPerPack(type);
  if (bytes <= kAnyKernelBytes || canRun(forced, facts(ranks), bytes, config, wire)) return forced;
  return *defaultAlgorithm(facts(ranks), bytes, config, wire).algorithm;
}
constexpr ForwardReason kExpectedForward = ForwardReason::Type;

// The element counts of one (world size, kernel, type, op) combination: 1, 3, 7, 1001 always;
// one middle size, rotating: 4097, 65537, each side of the 1shot/2shot switch of this world
// size (2 MiB at 2 ranks down to 128 KiB), just past where pull calls stop copying inside the
// kernel (512 KiB), just below the 1stage/2stage switch from 5 ranks (256 KiB); and every
// third combination about 1 MiB (an odd count).
std::vector<std::size_t> matrixCounts(int ranks, ElementType type, int rotor) {
  const std::size_t size = static_cast<std::size_t>(elementBytes(type));
  const std::size_t oneShot = oneShotLimit(facts(ranks));
  const std::size_t middles[] = {4097, 65537, oneShot / size, oneShot / size + 1, 512 * KiB / size + 1, 256 * KiB / size - 1};
  std::vector<std::size_t> counts = {1, 3, 7, 1001, middles[(rotor / 3) % 6]};
  if (rotor % 3 == 0) counts.push_back(MiB / size - 1);
  return counts;
}

void runMatrix(Algorithm forced, std::uint64_t seed) {
  Random random(seed);
  FailureLog log;
  int callIndex = 0;
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    Config config;
    config.algorithm = forced;
    config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
    // The pull kernels' input: each way of copying it at some world sizes.
    constexpr CopyMode kPullCopies[] = {CopyMode::Default, CopyMode::CopyEngine, CopyMode::Alternating};
    const CopyMode copy = isPush(forced) ? CopyMode::Default : kPullCopies[ranks % 3];
    OpRunner runner(kDevice, ranks, configsFor(config, copy), kLargestMessage);
    int combination = 0;
    for (ReduceOp op : kAllOps) {
      for (ElementType type : kAllTypes) {
        const int rotor = combination++ + ranks + static_cast<int>(forced);
        for (std::size_t count : matrixCounts(ranks, type, rotor)) {
          const OpCall call = makeCall(type, op, count, ranks, callIndex++);
          const OpOutcome outcome = runner.run(call, drawInputs(type, op, count, ranks, random));
          const std::size_t bytes = count * elementBytes(type);
          log.check(describeCall(ranks, algorithmName(forced), call) + ", " + copyModeName(copy), call, outcome,
                    expectedKernel(forced, ranks, type, bytes, config), kExpectedForward);
        }
      }
    }
  }
  log.report();
}

}  // namespace

// One case per kernel, so that two GPUs can run them side by side.
TEST_CASE("1shot: every op and type at every world size, against the reference", "[gpu][ops][types][matrix][1shot]") {
  runMatrix(Algorithm::OneShotPush, 20261201);
}

TEST_CASE("2shot: every op and type at every world size, against the reference", "[gpu][ops][types][matrix][2shot]") {
  runMatrix(Algorithm::TwoShotPush, 20261202);
}

TEST_CASE("1stage: every op and type at every world size, against the reference", "[gpu][ops][types][matrix][1stage]") {
  runMatrix(Algorithm::OneStage, 20261203);
}

TEST_CASE("2stage: every op and type at every world size, against the reference", "[gpu][ops][types][matrix][2stage]") {
  runMatrix(Algorithm::TwoStage, 20261204);
}

// The policy's own choice (no kernel forced) on either side of every point where it switches
// kernels, with the push kernels stopping at 64 KiB so that the pull kernels are reached:
// 1shot -> 2shot, 2shot -> the pull rule, 1stage -> 2stage. Each element count around a switch
// runs three (type, op) combinations, rotating through all 60. Whatever the policy says is
// what must happen: a call it takes runs on its kernel and is right; one it forwards is
// forwarded by every rank, for the same reason.
TEST_CASE("the policy's switch points, every op and type on either side", "[gpu][ops][types][thresholds]") {
  Random random(20261205);
  FailureLog log;
  int callIndex = 0, combination = 0;
  for (int ranks : {2, 3, 4, 5, 8}) {
    Config config;
    config.pushMaxBytes = 64 * KiB;
    config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
    OpRunner runner(kDevice, ranks, configsFor(config, CopyMode::Default), MiB);
    // bytes b: the kernel for b differs from that for b - 16, for types that travel as they
    // are (wire 1) or split (wire 2: integers, fp64), whose switch points differ.
    std::set<std::size_t> switchSet;
    for (int wire : {1, 2}) {
      for (std::size_t bytes = 32; bytes <= MiB - 64; bytes += 16) {
        if (chooseAlgorithm(facts(ranks), bytes, config, wire).algorithm !=
            chooseAlgorithm(facts(ranks), bytes - 16, config, wire).algorithm) {
          switchSet.insert(bytes);
        }
      }
    }
    const std::vector<std::size_t> switches(switchSet.begin(), switchSet.end());
    CAPTURE(ranks);
    CHECK(switches.size() >= (ranks == 2 ? 1u : 2u));
    for (std::size_t bytes : switches) {
      for (int c = 0; c < 3; ++c, ++combination) {
        const ReduceOp op = kAllOps[combination % 5];
        const ElementType type = kAllTypes[(combination / 5 + combination) % 12];
        const std::size_t size = static_cast<std::size_t>(elementBytes(type));
        for (std::size_t count : {(bytes - 16) / size, (bytes - 16) / size + 1, bytes / size - 1, bytes / size, bytes / size + 1}) {
          const OpCall call = makeCall(type, op, count, ranks, callIndex++);
          const OpOutcome outcome = runner.run(call, drawInputs(type, op, count, ranks, random));
          CallFacts callFacts;
          callFacts.type = type;
          callFacts.op = op;
          callFacts.count = count;
          const CallPlan plan = planCall(facts(ranks), callFacts, config);
          log.check(describeCall(ranks, "auto", call) + ", switch at " + std::to_string(bytes) + " B", call, outcome,
                    plan.ours ? std::optional<Algorithm>(plan.algorithm) : std::nullopt, plan.reason);
        }
      }
    }
  }
  log.report();
}

// IEEE special values on every floating type with every op (host_data.h, specialInputs): NaN
// propagates through Sum, Prod and Avg; Min and Max follow fminf/fmaxf, which ignore a NaN
// unless every rank's value is NaN; infinities stay infinities (fp8 saturates them to its
// largest finite value, as __NV_SATFINITE does); 0 x inf is NaN; a zero's sign is free (push
// kernels send -0.0 as +0.0); subnormals of the accumulation type may be flushed.
TEST_CASE("NaN, infinities, zeros, subnormals and extremes with every op on every floating type",
          "[gpu][ops][types][special]") {
  Random random(20261206);
  FailureLog log;
  int callIndex = 0;
  for (int ranks : {2, 3, 8}) {
    for (Algorithm forced : {Algorithm::OneShotPush, Algorithm::TwoShotPush, Algorithm::OneStage, Algorithm::TwoStage}) {
      Config config;
      config.algorithm = forced;
      config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
      OpRunner runner(kDevice, ranks, configsFor(config, CopyMode::Default), 16411 * 8);
      for (ElementType type : kFloatingTypes) {
        for (ReduceOp op : kAllOps) {
          for (std::size_t count : {std::size_t{5}, std::size_t{1001}, std::size_t{16411}}) {
            const OpCall call = makeCall(type, op, count, ranks, callIndex++);
            const OpOutcome outcome = runner.run(call, specialInputs(type, op, count, ranks, random));
            log.check(describeCall(ranks, algorithmName(forced), call), call, outcome,
                      expectedKernel(forced, ranks, type, count * elementBytes(type), config), kExpectedForward);
          }
        }
      }
    }
  }
  log.report();
}

// Small enough for compute-sanitizer (memcheck, racecheck, synccheck): every type once per
// kernel and world size, the op rotating, odd counts at odd offsets. Hidden from the default
// run, which covers all of it: `car_gpu_tests "[sanitizer-ops]"`.
TEST_CASE("small share of the op and type matrix for compute-sanitizer", "[.][sanitizer-ops]") {
  Random random(20261207);
  FailureLog log;
  int callIndex = 0;
  for (int ranks : {2, 3}) {
    for (Algorithm forced : {Algorithm::OneShotPush, Algorithm::TwoShotPush, Algorithm::OneStage, Algorithm::TwoStage}) {
      Config config;
      config.algorithm = forced;
      config.maxBlocks = 2;
      OpRunner runner(kDevice, ranks, configsFor(config, CopyMode::Alternating), 1001 * 8);
      for (int t = 0; t < kElementTypeCount; ++t) {
        const ElementType type = kAllTypes[t];
        const ReduceOp op = kAllOps[(t + ranks + static_cast<int>(forced)) % 5];
        // Odd offsets (pattern 2) on every other call.
        const OpCall call = makeCall(type, op, 1001, ranks, callIndex++);
        const OpOutcome outcome = runner.run(call, drawInputs(type, op, 1001, ranks, random));
        log.check(describeCall(ranks, algorithmName(forced), call), call, outcome,
                  expectedKernel(forced, ranks, type, 1001 * elementBytes(type), config), kExpectedForward);
      }
    }
  }
  log.report();
}
