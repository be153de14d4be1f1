// Long runs: 100,000 back-to-back calls, CUDA graph capture with 1,000 replays, and the
// barrier counters running through their 32-bit wrap-around. Every call's output is
// compared on the device with the expected bits and poisoned again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>

#include "check_kernels.h"
#include "device_buffers.h"
#include "host_data.h"
#include "rank_group.h"

using namespace car;
using namespace car::testing;

namespace {

constexpr int kDevice = 0;

// One message size of a long run, with the exact expected result on every rank.
struct SizedSlot {
  std::size_t count;
  std::unique_ptr<DeviceBuffers> in, out, expected;
};

// Inputs are small integers, so the fp32 sum is exact in any order and every rank must
// produce exactly the bits computed here.
std::vector<SizedSlot> makeSlots(int ranks, const std::vector<std::size_t>& bytesList, Random& random) {
  std::vector<SizedSlot> slots;
  for (std::size_t bytes : bytesList) {
    SizedSlot slot;
    slot.count = bytes / 4;
    slot.in = std::make_unique<DeviceBuffers>(ranks, bytes);
    slot.out = std::make_unique<DeviceBuffers>(ranks, bytes);
    slot.expected = std::make_unique<DeviceBuffers>(ranks, bytes);
    HostBuffer sum{ElementType::Float32, std::vector<std::uint8_t>(bytes)};
    for (std::size_t i = 0; i < slot.count; ++i) sum.set(i, 0);
    for (int r = 0; r < ranks; ++r) {
      HostBuffer input{ElementType::Float32, std::vector<std::uint8_t>(bytes)};
      for (std::size_t i = 0; i < slot.count; ++i) {
        const double value = static_cast<double>(random.next() % 2001) - 1000.0;
        input.set(i, value);
        sum.set(i, sum.at(i) + value);
      }
      slot.in->upload(r, input);
    }
    for (int r = 0; r < ranks; ++r) slot.expected->upload(r, sum);
    slot.out->poison();
    slots.push_back(std::move(slot));
  }
  return slots;
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

// Enqueues one all-reduce per rank for `slot`, then each rank's compare-and-poison.
void callAndCheck(RankGroup& group, SizedSlot& slot, ErrorCounters& errors) {
  std::string why;
  const bool launched = group.allReduce(slot.in->constPointers(), slot.out->pointers(), slot.count,
                                        ElementType::Float32, &why);
  INFO("not launched: " << why);
  REQUIRE(launched);
  for (int r = 0; r < group.ranks(); ++r) {
    CHECK_CUDA(compareAndPoison(slot.out->at(r), slot.expected->at(r), slot.count * 4, errors.of(r),
                                group.stream(r)));
  }
}

// Sizes on both sides of the seed thresholds, so calls alternate between the kernels and
// between grid sizes (1, 9, 36 blocks) from one call to the next.
const std::vector<std::size_t> kMixedSizes = {16, 4096 + 16, 65536, 300 * 1024, 1048576};

}  // namespace

TEST_CASE("100,000 back-to-back calls, each checked, without a hang", "[gpu][long]") {
  for (int ranks : {2, 5, 8}) {
    Random random(ranks);
    Config config;
    config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
    RankGroup group(kDevice, ranks, config);
    auto slots = makeSlots(ranks, kMixedSizes, random);
    ErrorCounters errors(ranks);
    const int calls = ranks == 8 ? 100000 : 20000;
    const auto start = std::chrono::steady_clock::now();
    for (int call = 0; call < calls; ++call) callAndCheck(group, slots[call % slots.size()], errors);
    group.synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CAPTURE(ranks, calls, seconds);
    CHECK(errors.total() == 0);
    CHECK(group.engine(0).stats().taken(Algorithm::OneStage) + group.engine(0).stats().taken(Algorithm::TwoStage) ==
          static_cast<std::uint64_t>(calls));
    if (ranks > 4) CHECK(group.engine(0).stats().taken(Algorithm::TwoStage) > 0);
  }
}

TEST_CASE("CUDA graph capture of both kernels replays correctly 1,000 times", "[gpu][graph]") {
  for (int ranks : {2, 4, 8}) {
    Random random(100 + ranks);
    Config config;
    config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
    RankGroup group(kDevice, ranks, config);
    auto slots = makeSlots(ranks, kMixedSizes, random);
    ErrorCounters errors(ranks);

    // One graph per rank, captured on that rank's stream: the calls and their checks.
    std::vector<cudaGraphExec_t> graphs(ranks);
    for (int r = 0; r < ranks; ++r) {
      CHECK_CUDA(cudaStreamBeginCapture(group.stream(r), cudaStreamCaptureModeThreadLocal));
    }
    for (auto& slot : slots) callAndCheck(group, slot, errors);
    // End every capture before instantiating: instantiation is refused while this thread
    // still has a capture under way.
    std::vector<cudaGraph_t> captured(ranks);
    for (int r = 0; r < ranks; ++r) CHECK_CUDA(cudaStreamEndCapture(group.stream(r), &captured[r]));
    for (int r = 0; r < ranks; ++r) {
      CHECK_CUDA(cudaGraphInstantiate(&graphs[r], captured[r], 0));
      CHECK_CUDA(cudaGraphDestroy(captured[r]));
    }
    // Capture itself must not have run anything.
    CHECK(errors.total() == 0);

    constexpr int kReplays = 1000;
    for (int replay = 0; replay < kReplays; ++replay) {
      for (int r = 0; r < ranks; ++r) CHECK_CUDA(cudaGraphLaunch(graphs[r], group.stream(r)));
    }
    group.synchronize();
    CAPTURE(ranks);
    CHECK(errors.total() == 0);
    // A graph that ran nothing would leave no errors either: its last node, the check,
    // poisons every output, so poisoned outputs prove the replays ran.
    for (auto& slot : slots) {
      for (int r = 0; r < ranks; ++r) {
        const HostBuffer seen = slot.out->download(r, ElementType::Float32, slot.count);
        CHECK(std::all_of(seen.bytes.begin(), seen.bytes.end(), [](std::uint8_t b) { return b == 0xFF; }));
      }
    }
    for (int r = 0; r < ranks; ++r) CHECK_CUDA(cudaGraphExecDestroy(graphs[r]));
    CHECK(group.engine(0).stats().taken(Algorithm::OneStage) + group.engine(0).stats().taken(Algorithm::TwoStage) ==
          slots.size());
  }
}

TEST_CASE("barrier counters run through the 32-bit wrap-around", "[gpu][wrap]") {
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    for (AlgorithmOverride algorithm : {AlgorithmOverride::OneStage, AlgorithmOverride::TwoStage}) {
      Random random(ranks * 10 + static_cast<int>(algorithm));
      Config config;
      config.algorithm = algorithm;
      config.maxBlocks = coResidentBlockLimit(kDevice, ranks);
      RankGroup group(kDevice, ranks, config);
      // 40 rounds below the wrap: 1stage uses 2 barriers a call, 2stage 3.
      for (int r = 0; r < ranks; ++r) REQUIRE(group.engine(r).presetRound(0xFFFFFFFFu - 40) == cudaSuccess);
      auto slots = makeSlots(ranks, kMixedSizes, random);
      ErrorCounters errors(ranks);
      for (int call = 0; call < 60; ++call) callAndCheck(group, slots[call % slots.size()], errors);
      group.synchronize();
      CAPTURE(ranks, overrideName(algorithm));
      CHECK(errors.total() == 0);
    }
  }
}
