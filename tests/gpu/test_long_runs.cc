// Long runs: 100,000 back-to-back calls mixing every kernel (the all-gather's and the
// reduce-scatter's among the all-reduce's), eager calls and graph replays alternating on one
// communicator; CUDA graph capture with 1,000 replays; the pull kernels'
// barrier counters running through their 32-bit wrap-around (and read back past it). Every
// call's output is compared on the device with the expected bits and poisoned again. (The
// push kernels' area index cycles 0, 1, 2 and has no wrap-around.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <iterator>

#include "check_kernels.h"
#include "device_buffers.h"
#include "host_data.h"
#include "rank_group.h"
#include "rank_signal.h"

using namespace car;
using namespace car::testing;

namespace {

constexpr int kDevice = 0;

// One call of a long run, with the exact expected output of every rank. `count` is NCCL's
// (kernels/algorithms.h); `outCount` the elements of each rank's output.
struct CallCase {
  Collective collective;
  std::size_t count, outCount;
  std::unique_ptr<DeviceBuffers> in, out, expected;
};

struct CallShape {
  Collective collective;
  std::size_t bytes;  // the whole message: an all-gather's output, a reduce-scatter's input
};

// Inputs are small integers, so the fp32 sum is exact in any order and every rank must
// produce exactly the bits computed here. A whole message is a multiple of 4 x ranks bytes.
std::vector<CallCase> makeCallCases(int ranks, const std::vector<CallShape>& shapes, Random& random) {
  std::vector<CallCase> callCases;
  for (const CallShape& shape : shapes) {
    const std::size_t whole = shape.collective == Collective::AllReduce ? shape.bytes / 4 : shape.bytes / 4 / ranks * ranks;
    const std::size_t part = shape.collective == Collective::AllReduce ? whole : whole / ranks;
    const std::size_t inCount = shape.collective == Collective::AllGather ? part : whole;
    CallCase callCase{shape.collective, part, shape.collective == Collective::ReduceScatter ? part : whole, {}, {}, {}};
    callCase.in = std::make_unique<DeviceBuffers>(ranks, inCount * 4);
    callCase.out = std::make_unique<DeviceBuffers>(ranks, callCase.outCount * 4);
    callCase.expected = std::make_unique<DeviceBuffers>(ranks, callCase.outCount * 4);
    HostBuffer sum{ElementType::Float32, std::vector<std::uint8_t>(whole * 4)};  // all-gather: the inputs in rank order
    for (std::size_t i = 0; i < whole; ++i) sum.set(i, 0);
    for (int r = 0; r < ranks; ++r) {
      HostBuffer input{ElementType::Float32, std::vector<std::uint8_t>(inCount * 4)};
      for (std::size_t i = 0; i < inCount; ++i) {
        const double value = static_cast<double>(random.next() % 2001) - 1000.0;
        input.set(i, value);
        const std::size_t at = shape.collective == Collective::AllGather ? r * part + i : i;
        sum.set(at, sum.at(at) + value);
      }
      callCase.in->upload(r, input);
    }
    for (int r = 0; r < ranks; ++r) {
      if (shape.collective != Collective::ReduceScatter) {
        callCase.expected->upload(r, sum);
      } else {
        const auto block = sum.bytes.begin() + static_cast<long>(r * part * 4);
        callCase.expected->upload(r,
                                  HostBuffer{ElementType::Float32, std::vector<std::uint8_t>(block, block + part * 4)});
      }
    }
    callCase.out->poison();
    callCases.push_back(std::move(callCase));
  }
  return callCases;
}

class ErrorCounters {
 public:
  explicit ErrorCounters(int ranks) : ranks_(ranks) {
    CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&counters_), sizeof(unsigned long long) * ranks));
    CHECK_CUDA(cudaMemset(counters_, 0, sizeof(unsigned long long) * ranks));
  }
  ~ErrorCounters() { cudaFree(counters_); }
  unsigned long long* of(int rank) { return counters_ + rank; }
  unsigned long long total() {
    std::vector<unsigned long long> host(ranks_);
    CHECK_CUDA(cudaMemcpy(host.data(), counters_, sizeof(unsigned long long) * ranks_, cudaMemcpyDeviceToHost));
    unsigned long long sum = 0;
    for (auto n : host) sum += n;
    return sum;
  }

 private:
  int ranks_;
  unsigned long long* counters_ = nullptr;
};

// Enqueues one call per rank for `callCase`, then each rank's compare-and-poison.
void callAndCheck(RankGroup& group, CallCase& callCase, ErrorCounters& errors) {
  std::string why;
  const bool launched = group.submit(callCase.collective, callCase.in->constPointers(), callCase.out->pointers(),
                                     callCase.count, ElementType::Float32, ReduceOp::Sum, &why);
  INFO(collectiveName(callCase.collective) << " of " << callCase.count << " not launched: " << why);
  REQUIRE(launched);
  for (int r = 0; r < group.ranks(); ++r) {
    CHECK_CUDA(compareAndPoison(callCase.out->at(r), callCase.expected->at(r), callCase.outCount * 4, errors.of(r),
                                group.stream(r)));
  }
}

// With the push kernels limited to 64 KiB, these all-reduce sizes run every kernel at 5 to 8
// ranks (at 2 ranks all but 2shot and 2stage):
// 1shot (up to about 16 KiB, what 8 copies in one area allow), 2shot (to 64 KiB), then the
// pull rule, 1stage below 256 KiB and 2stage above. Grids change from one call to the next.
// 1004 bytes is not a whole number of packs. The all-gathers and reduce-scatters between them
// share the push areas with 1shot and 2shot (each a part per rank of at most a few KiB, what
// those areas hold at 8 ranks).
const std::vector<CallShape> kMixedShapes = {
    {Collective::AllReduce, 16},          {Collective::AllGather, 8 * 12},
    {Collective::AllReduce, 1004},        {Collective::ReduceScatter, 8 * 4 * 1001},
    {Collective::AllReduce, 4096 + 16},   {Collective::AllGather, 8 * 4 * 1000},
    {Collective::AllReduce, 48 * 1024},   {Collective::ReduceScatter, 8 * 12},
    {Collective::AllReduce, 65536 + 16},  {Collective::AllReduce, 300 * 1024},
    {Collective::AllReduce, 1048576}};

std::vector<CallShape> allReducesOf(const std::vector<CallShape>& shapes) {
  std::vector<CallShape> allReduces;
  std::copy_if(shapes.begin(), shapes.end(), std::back_inserter(allReduces),
               [](const CallShape& shape) { return shape.collective == Collective::AllReduce; });
  return allReduces;
}

Config mixedConfig(int ranks) {
  Config config;
  config.maxBytes = 1 << 20;
  config.pushMaxBytes = 64 << 10;
  config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
  return config;
}

std::uint64_t takenCalls(TestRank& engine) {
  std::uint64_t calls = 0;
  for (int a = 0; a < kAlgorithmCount; ++a) calls += engine.stats().taken(static_cast<Algorithm>(a));
  return calls;
}

// Captures one call per call case (and its check) on every rank's stream into one graph per rank.
std::vector<cudaGraphExec_t> captureCallCases(RankGroup& group, std::vector<CallCase>& callCases,
                                              ErrorCounters& errors) {
  const int ranks = group.ranks();
  for (int r = 0; r < ranks; ++r) CHECK_CUDA(cudaStreamBeginCapture(group.stream(r), cudaStreamCaptureModeThreadLocal));
  for (auto& callCase : callCases) callAndCheck(group, callCase, errors);
  // End every capture before instantiating: instantiation is refused while this thread
  // still has a capture under way.
  std::vector<cudaGraph_t> captured(ranks);
  for (int r = 0; r < ranks; ++r) CHECK_CUDA(cudaStreamEndCapture(group.stream(r), &captured[r]));
  std::vector<cudaGraphExec_t> graphs(ranks);
  for (int r = 0; r < ranks; ++r) {
    CHECK_CUDA(cudaGraphInstantiate(&graphs[r], captured[r], 0));
    CHECK_CUDA(cudaGraphDestroy(captured[r]));
  }
  return graphs;
}

}  // namespace

TEST_CASE("100,000 back-to-back calls mixing every kernel and size, eager and graph alternating",
          "[gpu][long]") {
  for (int ranks : {2, 5, 8}) {
    Random random(ranks);
    RankGroup group(kDevice, ranks, mixedConfig(ranks));
    auto callCases = makeCallCases(ranks, kMixedShapes, random);
    ErrorCounters errors(ranks);
    std::vector<cudaGraphExec_t> graphs = captureCallCases(group, callCases, errors);
    const std::uint64_t capturedCalls = takenCalls(group.engine(0));
    const int calls = ranks == 8 ? 100000 : 20000;
    const auto start = std::chrono::steady_clock::now();
    int issued = 0;
    for (int round = 0; issued < calls; ++round) {
      if (round % 2 == 0) {
        for (auto& callCase : callCases) callAndCheck(group, callCase, errors);
      } else {
        for (int r = 0; r < ranks; ++r) CHECK_CUDA(cudaGraphLaunch(graphs[r], group.stream(r)));
      }
      issued += static_cast<int>(callCases.size());
    }
    group.synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CAPTURE(ranks, issued, seconds);
    CHECK(errors.total() == 0);
    for (int r = 0; r < ranks; ++r) CHECK_CUDA(cudaGraphExecDestroy(graphs[r]));
    TestRank& engine = group.engine(0);
    CHECK(takenCalls(engine) - capturedCalls ==
          static_cast<std::uint64_t>((issued / callCases.size() + 1) / 2 * callCases.size()));
    CHECK(engine.stats().taken(Algorithm::OneShotPush) > 0);
    CHECK(engine.stats().taken(Algorithm::OneStage) > 0);
    CHECK(engine.stats().taken(Algorithm::AllGatherPush) > 0);
    CHECK(engine.stats().taken(Algorithm::ReduceScatterPush) > 0);
    // Two ranks' copies of 48 KiB still fit one area (1shot), and 2 ranks pull with 1stage only.
    if (ranks > 4) CHECK(engine.stats().taken(Algorithm::TwoShotPush) > 0);
    if (ranks > 4) CHECK(engine.stats().taken(Algorithm::TwoStage) > 0);
  }
}

TEST_CASE("CUDA graph capture of every kernel replays correctly 1,000 times", "[gpu][graph]") {
  for (int ranks : {2, 4, 8}) {
    Random random(100 + ranks);
    RankGroup group(kDevice, ranks, mixedConfig(ranks));
    auto callCases = makeCallCases(ranks, kMixedShapes, random);
    ErrorCounters errors(ranks);
    // Capture itself must not run anything: outputs poisoned with a byte that neither the
    // all-reduce (the sums) nor the check (0xFF) writes must keep it, and the check, had it
    // run on them, would have counted errors.
    constexpr std::uint8_t kNeverWritten = 0x5A;
    for (auto& callCase : callCases) callCase.out->poison(kNeverWritten);
    std::vector<cudaGraphExec_t> graphs = captureCallCases(group, callCases, errors);
    group.synchronize();
    CHECK(errors.total() == 0);
    for (auto& callCase : callCases) {
      for (int r = 0; r < ranks; ++r) {
        const HostBuffer seen = callCase.out->download(r, ElementType::Float32, callCase.outCount);
        CHECK(std::all_of(seen.bytes.begin(), seen.bytes.end(), [](std::uint8_t b) { return b == kNeverWritten; }));
      }
    }

    constexpr int kReplays = 1000;
    for (int replay = 0; replay < kReplays; ++replay) {
      for (int r = 0; r < ranks; ++r) CHECK_CUDA(cudaGraphLaunch(graphs[r], group.stream(r)));
    }
    group.synchronize();
    CAPTURE(ranks);
    CHECK(errors.total() == 0);
    // A graph that ran nothing would leave no errors either: its last node, the check,
    // poisons every output, so poisoned outputs prove the replays ran.
    for (auto& callCase : callCases) {
      for (int r = 0; r < ranks; ++r) {
        const HostBuffer seen = callCase.out->download(r, ElementType::Float32, callCase.outCount);
        CHECK(std::all_of(seen.bytes.begin(), seen.bytes.end(), [](std::uint8_t b) { return b == 0xFF; }));
      }
    }
    for (int r = 0; r < ranks; ++r) CHECK_CUDA(cudaGraphExecDestroy(graphs[r]));
    CHECK(takenCalls(group.engine(0)) == callCases.size());
  }
}

TEST_CASE("barrier counters run through the 32-bit wrap-around", "[gpu][wrap]") {
  constexpr std::uint32_t kStart = 0xFFFFFFFFu - 40;  // 40 rounds below the wrap
  constexpr int kCalls = 60;
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    for (Algorithm algorithm : {Algorithm::OneStage, Algorithm::TwoStage}) {
      Random random(ranks * 10 + static_cast<int>(algorithm));
      Config config;
      config.algorithm = algorithm;
      config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
      RankGroup group(kDevice, ranks, config);
      for (int r = 0; r < ranks; ++r) REQUIRE(group.engine(r).presetRound(kStart) == cudaSuccess);
      // All-reduces only: NCCL_CAR_ALGO forces the all-reduce's kernel, and the all-gathers
      // and reduce-scatters run their own, which count no barrier of the forced kernel's.
      auto callCases = makeCallCases(ranks, allReducesOf(kMixedShapes), random);
      ErrorCounters errors(ranks);
      for (int call = 0; call < kCalls; ++call) callAndCheck(group, callCases[call % callCases.size()], errors);
      group.synchronize();
      CAPTURE(ranks, algorithmName(algorithm));
      CHECK(errors.total() == 0);
      // The counters crossed zero: block 0 (in every grid) of every rank counted every call's
      // barriers, 2 a call for 1stage (entry, exit), 3 for 2stage (and the middle one), and
      // ended past the wrap.
      const Algorithm forced = algorithm;
      const std::uint32_t barriers = forced == Algorithm::OneStage ? 2 : 3;
      const std::uint32_t end = kStart + barriers * kCalls;  // wraps
      CHECK(end < kStart);
      for (int r = 0; r < ranks; ++r) {
        CHECK(group.engine(r).stats().taken(forced) == static_cast<std::uint64_t>(kCalls));
        Signal signal;
        CHECK_CUDA(cudaMemcpy(&signal, group.block(r).base(), sizeof(Signal), cudaMemcpyDeviceToHost));
        for (int lane = 0; lane < ranks; ++lane) CHECK(signal.roundOf[0][lane] == end);
      }
    }
  }
}
