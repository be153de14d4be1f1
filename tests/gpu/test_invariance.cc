// One result per element (docs/design.md; the promise NCCL_CAR_DETERMINISTIC lets a user rely
// on, docs/user-guide.md): the same per-element inputs, reduced as a prefix of many message
// sizes (odd ones, either side of every point where the policy switches kernels and where a
// grid changes shape), by every kernel forced and by the policy's own choice, with
// NCCL_CAR_MAX_BLOCKS from 1 to what fits, PDL on and off, the pull input copied in the
// kernel or by the copy engine, in place and out of place, aligned and at any byte offset,
// eager and replayed from a CUDA graph, with NCCL_CAR_DETERMINISTIC and without, give every
// element bitwise the same value on every rank as the first call (1stage at the largest
// size) gave it. For every world size 2 to 8, every floating type and op.
// That first result is checked against the host model (tests/common/rank_order.h) on a sample
// of elements: the ranks in the order 0..n-1, one rounding, zeros +0.0.
//
// Each rank's inputs stay on the device; every call is checked there (countDifferingBytes), so
// a few hundred calls per (world size, type, op) cost little more than their kernels. Tag:
// [invariance]; about a minute on an H200.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "check_kernels.h"
#include "device_buffers.h"
#include "op_runner.h"
#include "policy.h"
#include "rank_order.h"

using namespace car;
using namespace car::testing;

namespace {

constexpr int kDevice = 0;
constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::size_t kMaxCallsPerCombination = 1024;

CommunicatorFacts factsOf(int ranks) { return CommunicatorFacts{ranks, true, computeCapability(kDevice)}; }

// The largest message at `ranks` ranks: past the 1shot/2shot switch, past the point where a
// 2shot rank's shard takes full blocks (256 KiB), past the pull kernels' switch (768 KiB on
// sm_90 at 3-4 ranks), odd.
std::size_t largestMessageBytes(int ranks) {
  return std::max({oneShotLimit(factsOf(ranks)), 256 * KiB * static_cast<std::size_t>(ranks), 768 * KiB}) + 64 * KiB + 8;
}

struct Variant {
  std::string name;
  Config config;
};

std::vector<Variant> variantsFor(int ranks) {
  const int fits = coResidentBlockLimit(kDevice, ranks);
  const int fitsWithoutPdl = coResidentBlockLimit(kDevice, ranks, false);
  auto variant = [](std::string name, std::optional<Algorithm> algorithm, int blocks, bool pdl = true,
                    std::size_t copyInKernelBytes = kDefaultCopyInKernelBytes, bool deterministic = false) {
    Config config;
    config.algorithm = algorithm;
    config.maxBlocks = blocks;
    config.pdl = pdl;
    config.copyInKernelBytes = copyInKernelBytes;
    config.deterministic = deterministic;
    return Variant{std::move(name) + ", " + std::to_string(blocks) + " blocks" + (pdl ? "" : ", no PDL"), config};
  };
  // The first one (1stage, which takes every size) makes the reference; 3 and 4 are also
  // replayed from graphs.
  return {
      variant("1stage", Algorithm::OneStage, fits),
      variant("1shot", Algorithm::OneShotPush, fits),
      variant("2shot", Algorithm::TwoShotPush, fits),
      variant("auto", std::nullopt, fits),
      variant("2stage", Algorithm::TwoStage, fits),
      variant("1shot", Algorithm::OneShotPush, 1),
      variant("2shot", Algorithm::TwoShotPush, std::min(3, fits)),
      variant("1stage, copy engine", Algorithm::OneStage, 1, true, 0),
      variant("2stage", Algorithm::TwoStage, std::min(5, fitsWithoutPdl), false),
      variant("auto", std::nullopt, std::min(7, fitsWithoutPdl), false),
      variant("auto, NCCL_CAR_DETERMINISTIC", std::nullopt, fits, true, kDefaultCopyInKernelBytes, true),
  };
}

// Element counts: small odd ones, then one element either side of every size where the
// policy switches kernels or a grid changes shape at this world size, and the largest.
std::vector<std::size_t> countsFor(int ranks, ElementType type, std::size_t largestCount) {
  const std::size_t size = static_cast<std::size_t>(elementBytes(type));
  const std::size_t fits = static_cast<std::size_t>(coResidentBlockLimit(kDevice, ranks));
  const std::size_t oneShot = oneShotLimit(factsOf(ranks));
  const std::size_t n = static_cast<std::size_t>(ranks);
  std::set<std::size_t> counts = {1, 2, 3, 7, 9, 31, 33, 127, 1001, largestCount};
  const std::size_t around[] = {
      2 * KiB, 8 * KiB, 64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, 768 * KiB, 1 * MiB, 2 * MiB,
      oneShot,                     // 1shot / 2shot, fp8 to fp32
      oneShot / 16,                // 1shot / 2shot, fp64
      fits * 2 * KiB,              // 1shot's grid reaches its cap (128-thread blocks, 2 KiB each)
      n * fits * 2 * KiB,          // 2shot's grid reaches its cap
      kMaxBlocks * 8 * KiB,        // the pull grid reaches its 36 blocks (8 KiB each)
      n * 256 * KiB,               // 2shot's blocks widen
  };
  for (std::size_t bytes : around) {
    const std::size_t count = bytes / size;
    if (count >= 2 && count + 1 < largestCount) {
      counts.insert(count - 1);
      counts.insert(count + 1);
    }
  }
  return {counts.begin(), counts.end()};
}

// Waits for every stream of the group (kernels, copies, checks, graph replays).
bool idleWithin(RankGroup& group, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (int r = 0; r < group.ranks(); ++r) {
    cudaError_t status;
    while ((status = cudaStreamQuery(group.stream(r))) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    CHECK_CUDA(status);
  }
  return true;
}

// One rank-group per variant, the device copies of every rank's inputs, and the per-call
// difference counters of one (type, op).
class Rig {
 public:
  explicit Rig(int ranks)
      : ranks_(ranks),
        largest_(largestMessageBytes(ranks)),
        pristine_(ranks, largest_),
        send_(ranks, largest_ + OpRunner::kMaxShift),
        recv_(ranks, largest_ + OpRunner::kMaxShift),
        reference_(1, largest_) {
    for (Variant& variant : variantsFor(ranks)) {
      variants_.push_back(variant);
      groups_.push_back(std::make_unique<RankGroup>(kDevice, ranks, variant.config));
    }
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&counters_), kMaxCallsPerCombination * sizeof(unsigned long long)));
  }
  ~Rig() { cudaFree(counters_); }

  int ranks() const { return ranks_; }
  std::size_t largestBytes() const { return largest_; }
  const std::vector<Variant>& variants() const { return variants_; }
  RankGroup& group(std::size_t v) { return *groups_[v]; }
  void* reference() const { return reference_.at(0); }
  const DeviceBuffers& pristine() const { return pristine_; }

  // The first `bytes` of the first ranks() buffers of `inputs` (a draw for more ranks may serve).
  void upload(const std::vector<HostBuffer>& inputs, std::size_t bytes) {
    for (int r = 0; r < ranks_; ++r) {
      CHECK_CUDA(cudaMemcpy(pristine_.at(r), inputs[r].bytes.data(), bytes, cudaMemcpyHostToDevice));
    }
    CHECK_CUDA(cudaMemset(counters_, 0, kMaxCallsPerCombination * sizeof(unsigned long long)));
    CHECK_CUDA(cudaDeviceSynchronize());
  }

  struct Call {
    ElementType type;
    ReduceOp op;
    std::size_t count;
    bool inPlace;
    std::vector<std::size_t> sendShift, recvShift;
  };
  struct Submitted {
    int launched = 0;
    std::optional<Algorithm> ran;
    bool sameKernel = true;
    ForwardReason reason = ForwardReason::kCount;
  };

  void* output(const Call& call, int r) const {
    return call.inPlace ? static_cast<char*>(send_.at(r)) + call.sendShift[r]
                        : static_cast<char*>(recv_.at(r)) + call.recvShift[r];
  }

  // Every rank: its input prefix copied from the device copy, the all-reduce, and (where it
  // ran) the output compared with the reference into the difference counter of call case
  // `callCase`. Nothing waits.
  Submitted enqueue(std::size_t v, const Call& call, std::size_t callCase, bool compare = true) {
    RankGroup& g = group(v);
    const std::size_t bytes = call.count * static_cast<std::size_t>(elementBytes(call.type));
    Submitted submitted;
    std::vector<SubmitResult> results;
    for (int r = 0; r < ranks_; ++r) {
      char* send = static_cast<char*>(send_.at(r)) + call.sendShift[r];
      CHECK_CUDA(cudaMemcpyAsync(send, pristine_.at(r), bytes, cudaMemcpyDeviceToDevice, g.stream(r)));
      CollectiveCall submit;
      submit.send = send;
      submit.recv = output(call, r);
      submit.count = call.count;
      submit.type = call.type;
      submit.op = call.op;
      submit.stream = g.stream(r);
      results.push_back(g.engine(r).submit(submit));
      submitted.launched += results.back().launched;
    }
    if (submitted.launched == 0) {
      submitted.reason = results[0].reason;
      return submitted;
    }
    submitted.ran = results[0].algorithm;
    for (const SubmitResult& result : results) submitted.sameKernel = submitted.sameKernel && result.algorithm == *submitted.ran;
    if (compare && submitted.launched == ranks_) {
      for (int r = 0; r < ranks_; ++r) {
        CHECK_CUDA(countDifferingBytes(output(call, r), reference(), bytes, counters_ + callCase, g.stream(r)));
      }
    }
    return submitted;
  }

  // Captures enqueue(v, call, callCase) into one graph per rank and replays it twice.
  Submitted replayFromGraph(std::size_t v, const Call& call, std::size_t callCase) {
    RankGroup& g = group(v);
    for (int r = 0; r < ranks_; ++r) CHECK_CUDA(cudaStreamBeginCapture(g.stream(r), cudaStreamCaptureModeThreadLocal));
    const Submitted submitted = enqueue(v, call, callCase);
    std::vector<cudaGraph_t> graphs(ranks_);
    for (int r = 0; r < ranks_; ++r) CHECK_CUDA(cudaStreamEndCapture(g.stream(r), &graphs[r]));
    std::vector<cudaGraphExec_t> execs(ranks_);
    for (int r = 0; r < ranks_; ++r) {
      CHECK_CUDA(cudaGraphInstantiate(&execs[r], graphs[r], 0));
      CHECK_CUDA(cudaGraphDestroy(graphs[r]));
    }
    for (int replay = 0; replay < 2; ++replay) {
      for (int r = 0; r < ranks_; ++r) CHECK_CUDA(cudaGraphLaunch(execs[r], g.stream(r)));
    }
    const bool idle = idleWithin(g, hangSeconds());
    for (int r = 0; r < ranks_ && idle; ++r) CHECK_CUDA(cudaGraphExecDestroy(execs[r]));
    if (!idle) abandon(v);
    return submitted;
  }

  // A call that hung, or that only some ranks launched: every kernel of the group is told to
  // stop, and the variant gets a fresh group.
  void abandon(std::size_t v) {
    for (int r = 0; r < ranks_; ++r) groups_[v]->engine(r).raiseAbort();
    if (!idleWithin(*groups_[v], hangSeconds())) {
      std::fprintf(stderr, "a kernel did not stop after the abort; its group is leaked\n");
      groups_[v].release();
    }
    groups_[v] = std::make_unique<RankGroup>(kDevice, ranks_, variants_[v].config);
  }

  std::vector<unsigned long long> counters(std::size_t calls) const {
    std::vector<unsigned long long> values(calls);
    CHECK_CUDA(cudaMemcpy(values.data(), counters_, calls * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    return values;
  }

 private:
  int ranks_;
  std::size_t largest_;
  DeviceBuffers pristine_, send_, recv_, reference_;
  std::vector<Variant> variants_;
  std::vector<std::unique_ptr<RankGroup>> groups_;
  unsigned long long* counters_ = nullptr;
};

std::string describeCall(int ranks, const Variant& variant, const Rig::Call& call, const Rig::Submitted& submitted) {
  std::ostringstream text;
  text << ranks << " ranks, " << variant.name << ", " << elementTypeName(call.type) << " " << reduceOpName(call.op)
       << ", " << call.count << " elements, " << (call.inPlace ? "in place" : "out of place") << ", send +"
       << call.sendShift[0] << "..., ran " << (submitted.ran ? algorithmName(*submitted.ran) : "nothing");
  return text.str();
}

// The first call's result against the host model, on the first 4096 elements and every 97th.
void checkAgainstModel(const Rig& rig, const std::vector<HostBuffer>& inputs, ElementType type, ReduceOp op,
                       std::size_t count, const std::string& where) {
  std::vector<std::size_t> sample;
  for (std::size_t i = 0; i < count; ++i) {
    if (i < 4096 || i % 97 == 0) sample.push_back(i);
  }
  const std::size_t size = static_cast<std::size_t>(elementBytes(type));
  HostBuffer got{type, std::vector<std::uint8_t>(count * size)};
  CHECK_CUDA(cudaMemcpy(got.bytes.data(), rig.reference(), got.bytes.size(), cudaMemcpyDeviceToHost));
  std::vector<HostBuffer> sampled(rig.ranks(), HostBuffer{type, std::vector<std::uint8_t>(sample.size() * size)});
  HostBuffer gotSampled{type, std::vector<std::uint8_t>(sample.size() * size)};
  for (std::size_t k = 0; k < sample.size(); ++k) {
    for (int r = 0; r < rig.ranks(); ++r) sampled[r].setBits(k, inputs[r].bitsAt(sample[k]));
    gotSampled.setBits(k, got.bitsAt(sample[k]));
  }
  std::string first;
  const std::size_t different = countDifferentResults(rankOrderResult(sampled, op), gotSampled, &first);
  if (different != 0) FAIL_CHECK(where << ": " << different << " sampled elements differ from the host model; " << first);
}

// What one run checks: these world sizes, types and ops, messages of at most `countCap`
// elements (the whole range when 0).
struct Scope {
  std::vector<int> worldSizes;
  std::vector<ElementType> types;
  std::vector<ReduceOp> ops;
  std::size_t countCap = 0;
};

void checkInvariance(const Scope& scope) {
  const bool fp8Reduced = computeCapability(kDevice) >= 90;  // below sm_90 NCCL (and we) refuse fp8
  if (!fp8Reduced) WARN("fp8 not checked: this GPU is older than sm_90, where fp8 all-reduces go to NCCL");
  int failures = 0;
  auto fail = [&failures](const std::string& text) {
    if (failures++ < 40) FAIL_CHECK(text);
  };
  auto largestCountOf = [&scope](std::size_t bytes, ElementType type) {
    const std::size_t count = bytes / static_cast<std::size_t>(elementBytes(type));
    return scope.countCap != 0 ? std::min(count, scope.countCap) : count;
  };
  // One draw per type for the largest world size and message, and one for products: every
  // world size takes its first ranks and its first elements, every op but Prod the same values.
  std::size_t drawnBytes = 0;
  for (int ranks : scope.worldSizes) drawnBytes = std::max(drawnBytes, largestMessageBytes(ranks));
  // Drawn side by side: a few seconds of host time on one core.
  std::map<std::pair<ElementType, bool>, std::future<std::vector<HostBuffer>>> drawing;
  for (ElementType type : scope.types) {
    for (bool product : {false, true}) {
      const ReduceOp op = product ? ReduceOp::Prod : ReduceOp::Sum;
      const std::size_t count = largestCountOf(drawnBytes, type);
      const std::uint64_t seed = 7919 * static_cast<std::uint64_t>(type) + product;
      drawing[{type, product}] = std::async(std::launch::async, [=] {
        return invarianceInputs(type, op, count, kMaxRanks, seed);
      });
    }
  }
  std::map<std::pair<ElementType, bool>, std::vector<HostBuffer>> draws;
  for (auto& [key, draw] : drawing) draws[key] = draw.get();
  std::size_t calls = 0;
  for (int ranks : scope.worldSizes) {
    Rig rig(ranks);
    for (ElementType type : scope.types) {
      if (isFp8(type) && !fp8Reduced) continue;
      const std::size_t size = static_cast<std::size_t>(elementBytes(type));
      const std::size_t largestCount = largestCountOf(rig.largestBytes(), type);
      const std::vector<std::size_t> counts = countsFor(ranks, type, largestCount);
      std::map<Algorithm, int> ran;
      for (ReduceOp op : scope.ops) {
        const std::vector<HostBuffer>& inputs = draws.at({type, op == ReduceOp::Prod});
        rig.upload(inputs, largestCount * size);
        std::vector<std::string> described;  // what each call case (one difference counter each) checked

        // The reference: 1stage (variant 0) at the largest message, out of place, aligned.
        const Rig::Call first{type, op, largestCount, false, std::vector<std::size_t>(ranks, 0),
                              std::vector<std::size_t>(ranks, 0)};
        const Rig::Submitted made = rig.enqueue(0, first, 0, /*compare=*/false);
        const std::string firstText = describeCall(ranks, rig.variants()[0], first, made);
        if (made.launched != ranks || !idleWithin(rig.group(0), hangSeconds())) {
          fail(firstText + ": the reference call did not run on every rank");
          rig.abandon(0);
          continue;
        }
        CHECK_CUDA(cudaMemcpy(rig.reference(), rig.output(first, 0), largestCount * size, cudaMemcpyDeviceToDevice));
        CHECK_CUDA(cudaDeviceSynchronize());  // a device-to-device cudaMemcpy may return before it is done
        checkAgainstModel(rig, inputs, type, op, largestCount, firstText);

        int callIndex = 0;
        for (std::size_t v = 0; v < rig.variants().size(); ++v) {
          for (std::size_t count : counts) {
            const int pattern = callIndex % 3;
            const Rig::Call call{type, op, count, (callIndex / 3) % 2 == 1, shiftsFor(ranks, type, pattern, callIndex),
                                 shiftsFor(ranks, type, pattern, callIndex + 7)};
            ++callIndex;
            const std::size_t callCase = described.size();
            REQUIRE(callCase + 1 < kMaxCallsPerCombination);
            const Rig::Submitted submitted = rig.enqueue(v, call, callCase);
            described.push_back(describeCall(ranks, rig.variants()[v], call, submitted));
            ++calls;
            if (submitted.launched == 0) {
              // Only a size no kernel of ours may take (fp64 past its push limit) goes to NCCL.
              if (submitted.reason != ForwardReason::TooLarge) {
                fail(described.back() + ": forwarded as " + forwardReasonName(submitted.reason));
              }
              continue;
            }
            if (submitted.launched != ranks || !submitted.sameKernel) {
              fail(described.back() + ": not launched by every rank on one kernel");
              rig.abandon(v);
              continue;
            }
            ++ran[*submitted.ran];
          }
          // A captured call, replayed twice: on the policy's choice (variant 3) and on 2stage (4).
          if (v == 3 || v == 4) {
            const std::size_t count = counts[counts.size() / 2];
            const Rig::Call call{type, op, count, true, shiftsFor(ranks, type, 2, callIndex),
                                 shiftsFor(ranks, type, 2, callIndex)};
            const std::size_t callCase = described.size();
            const Rig::Submitted submitted = rig.replayFromGraph(v, call, callCase);
            described.push_back(describeCall(ranks, rig.variants()[v], call, submitted) + ", graph replayed twice");
            if (submitted.launched != 0 && submitted.launched != ranks) fail(described.back() + ": not every rank captured it");
          }
          if (!idleWithin(rig.group(v), hangSeconds())) {
            fail(std::to_string(ranks) + " ranks, " + rig.variants()[v].name + ", " + elementTypeName(type) + " " +
                 reduceOpName(op) + ": hung");
            rig.abandon(v);
          }
        }
        const std::vector<unsigned long long> differing = rig.counters(described.size());
        for (std::size_t callCase = 0; callCase < described.size(); ++callCase) {
          if (differing[callCase] != 0) {
            fail(described[callCase] + ": " + std::to_string(differing[callCase]) +
                 " bytes differ from the reference (" + firstText + ")");
          }
        }
      }
      // Every all-reduce kernel took part at this world size and type.
      for (int a = 0; a < kAllReduceAlgorithmCount; ++a) {
        CAPTURE(ranks, elementTypeName(type), algorithmName(static_cast<Algorithm>(a)));
        CHECK(ran[static_cast<Algorithm>(a)] > 0);
      }
    }
  }
  CHECK(failures == 0);
  CHECK(calls > 0);
}

}  // namespace

TEST_CASE("invariance: every element's result is the same bits at every size, kernel, grid, alignment and launch",
          "[invariance]") {
  checkInvariance(Scope{{2, 3, 4, 5, 6, 7, 8},
                        {std::begin(kFloatingTypes), std::end(kFloatingTypes)},
                        {std::begin(kAllOps), std::end(kAllOps)}});
}

// compute-sanitizer's share (tests/gpu/run-gpu-tests.sh): 3 ranks (where 2stage's order
// once showed), bf16 sums, up to 2000 elements, every configuration: about 150 calls.
TEST_CASE("invariance: a small share for compute-sanitizer", "[.][sanitizer-invariance]") {
  checkInvariance(Scope{{3}, {ElementType::BFloat16}, {ReduceOp::Sum}, 2000});
}
