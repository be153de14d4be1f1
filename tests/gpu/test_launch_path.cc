// The launch path's promises that no kernel check can show: a call of ours is ordered after
// the previous call of its communicator whatever stream either came on, and an error the
// application left in CUDA's last-error slot neither makes our launch look failed nor
// survives it; and every kernel can be launched through the driver.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <thread>
#include <vector>

#include "check_kernels.h"
#include "host_gate.h"
#include "device_buffers.h"
#include "host_data.h"
#include "rank_group.h"

using namespace car;
using namespace car::testing;

namespace {

constexpr int kDevice = 0;
constexpr int kRanks = 2;
constexpr std::size_t kCount = 4096;  // fp32, 16 KiB: 1shot

CollectiveCall sumCall(const DeviceBuffers& in, DeviceBuffers& out, int rank, cudaStream_t stream) {
  CollectiveCall call;
  call.send = in.at(rank);
  call.recv = out.at(rank);
  call.count = kCount;
  call.type = ElementType::Float32;
  call.op = ReduceOp::Sum;
  call.stream = stream;
  return call;
}

// Every element of every rank's input is rank + 1: the sum is kRanks (kRanks + 1) / 2.
void fillInputs(DeviceBuffers& in) {
  for (int r = 0; r < kRanks; ++r) {
    HostBuffer values{ElementType::Float32, std::vector<std::uint8_t>(kCount * 4)};
    for (std::size_t i = 0; i < kCount; ++i) values.set(i, r + 1);
    in.upload(r, values);
  }
}

bool allEqual(const DeviceBuffers& out, int rank, double value) {
  const HostBuffer seen = out.download(rank, ElementType::Float32, kCount);
  for (std::size_t i = 0; i < kCount; ++i) {
    if (seen.at(i) != value) return false;
  }
  return true;
}

// Waits until `last` and every rank's stream are done; after `seconds`, says where it stands
// and stops our kernels (a failed ordering can leave one waiting for a peer forever), so that
// a failure is reported instead of hanging the test program.
bool drainedWithin(RankGroup& group, cudaEvent_t last, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    bool done = cudaEventQuery(last) == cudaSuccess;
    for (int r = 0; r < group.ranks(); ++r) done = done && cudaStreamQuery(group.stream(r)) == cudaSuccess;
    if (done) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::fprintf(stderr, "launch-path test: work still pending after %.0f s (second call: %s); aborting our kernels\n",
               seconds, cudaGetErrorName(cudaEventQuery(last)));
  for (int r = 0; r < group.ranks(); ++r) group.engine(r).raiseAbort();
  return false;
}

// Rank 0 makes its first call on `first` behind a closed gate and its second on the stream
// makeSecond() returns (on another thread when asked); rank 1 makes both on its own stream.
// Rank 0's second call must not start before its first: while the gate is closed, an event
// recorded after it must stay unreached.
void checkSecondCallWaitsForFirst(RankGroup& group, cudaStream_t first, const std::function<cudaStream_t()>& makeSecond,
                                  bool onAnotherThread) {
  DeviceBuffers in(kRanks, kCount * 4), out1(kRanks, kCount * 4), out2(kRanks, kCount * 4);
  fillInputs(in);
  out1.poison();
  out2.poison();
  Gate gate;
  std::fprintf(stderr, "launch-path test: gate closed\n");
  CHECK_CUDA(launchGate(gate.word(), first));
  CHECK(group.engine(0).submit(sumCall(in, out1, 0, first)).launched);
  CHECK(group.engine(1).submit(sumCall(in, out1, 1, group.stream(1))).launched);
  cudaEvent_t afterSecond = nullptr;
  CHECK_CUDA(cudaEventCreateWithFlags(&afterSecond, cudaEventDisableTiming));
  bool secondLaunched = false;
  auto submitSecond = [&] {
    CHECK_CUDA(cudaSetDevice(kDevice));
    const cudaStream_t second = makeSecond();
    secondLaunched = group.engine(0).submit(sumCall(in, out2, 0, second)).launched;
    CHECK_CUDA(cudaEventRecord(afterSecond, second));
  };
  // The other thread stays alive until its per-thread stream's work is done.
  std::promise<void> submitted, mayExit;
  std::thread other;
  if (onAnotherThread) {
    other = std::thread([&] {
      submitSecond();
      submitted.set_value();
      mayExit.get_future().wait();
    });
    submitted.get_future().wait();
  } else {
    submitSecond();
  }
  CHECK(secondLaunched);
  CHECK(group.engine(1).submit(sumCall(in, out2, 1, group.stream(1))).launched);
  std::fprintf(stderr, "launch-path test: all four calls submitted\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const cudaError_t reached = cudaEventQuery(afterSecond);
  gate.open();
  CHECK(drainedWithin(group, afterSecond, 20.0));
  CHECK_CUDA(cudaDeviceSynchronize());
  if (other.joinable()) {
    mayExit.set_value();
    other.join();
  }
  CHECK(reached == cudaErrorNotReady);
  CHECK_CUDA(cudaEventDestroy(afterSecond));
  const double sum = kRanks * (kRanks + 1) / 2.0;
  for (int r = 0; r < kRanks; ++r) {
    CHECK(allEqual(out1, r, sum));
    CHECK(allEqual(out2, r, sum));
  }
}

Config smallConfig() {
  Config config;
  config.maxBytes = 1 << 20;
  config.maxBlocks = coResidentBlockLimit(kDevice, kRanks);
  return config;
}

}  // namespace

TEST_CASE("calls on cudaStreamPerThread of two threads (one handle, two streams) are ordered",
          "[gpu][launch-path]") {
  RankGroup group(kDevice, kRanks, smallConfig());
  checkSecondCallWaitsForFirst(group, cudaStreamPerThread, [] { return cudaStreamPerThread; }, true);
}

TEST_CASE("a call on a new stream that may reuse a destroyed stream's handle is ordered", "[gpu][launch-path]") {
  RankGroup group(kDevice, kRanks, smallConfig());
  cudaStream_t first = nullptr;
  cudaStream_t second = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&first, cudaStreamNonBlocking));
  checkSecondCallWaitsForFirst(group, first, [&] {
    // Destroyed with the gated call still queued (it runs anyway); the next stream often gets
    // the same handle back.
    CHECK_CUDA(cudaStreamDestroy(first));
    CHECK_CUDA(cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking));
    return second;
  }, false);
  CHECK_CUDA(cudaStreamDestroy(second));
}

TEST_CASE("a stale CUDA error of the application neither fails our launch nor outlives it",
          "[gpu][launch-path]") {
  RankGroup group(kDevice, kRanks, smallConfig());
  DeviceBuffers in(kRanks, kCount * 4), out(kRanks, kCount * 4);
  fillInputs(in);
  out.poison();
  for (int r = 0; r < kRanks; ++r) {
    CHECK(leaveStaleLaunchError() != cudaSuccess);
    CHECK(cudaPeekAtLastError() != cudaSuccess);  // still there when we are called
    const SubmitResult result = group.engine(r).submit(sumCall(in, out, r, group.stream(r)));
    CHECK(result.launched);
    CHECK(result.error == cudaSuccess);
    CHECK(cudaGetLastError() == cudaSuccess);
  }
  cudaEvent_t done = nullptr;
  CHECK_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventRecord(done, group.stream(0)));
  CHECK(drainedWithin(group, done, 20.0));
  CHECK_CUDA(cudaEventDestroy(done));
  group.synchronize();
  for (int r = 0; r < kRanks; ++r) CHECK(allEqual(out, r, kRanks * (kRanks + 1) / 2.0));
}

TEST_CASE("every kernel of every world size resolves for the driver, so no launch of ours needs the runtime's lookup",
          "[gpu][launch-path]") {
  CHECK_CUDA(cudaSetDevice(kDevice));
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    KernelTable table;
    REQUIRE(loadKernels(ranks, &table) == cudaSuccess);
    CHECK(table.ranks == ranks);
    int resolved = 0;
    for (const auto& byAlgorithm : table.functions) {
      for (void* function : byAlgorithm) resolved += function != nullptr;
    }
    CHECK(resolved == kElementTypeCount * kAlgorithmCount);
  }
  KernelTable outOfRange;
  outOfRange.ranks = 5;
  CHECK(loadKernels(kMaxRanks + 1, &outOfRange) == cudaErrorInvalidValue);
  CHECK(outOfRange.ranks == 0);
  CHECK(outOfRange.functions[0][0] == nullptr);
}

TEST_CASE("eager calls launch through the driver, captured ones through the runtime", "[gpu][launch-path]") {
  RankGroup group(kDevice, kRanks, smallConfig());
  DeviceBuffers in(kRanks, kCount * 4), out(kRanks, kCount * 4);
  fillInputs(in);
  out.poison();
  for (int r = 0; r < kRanks; ++r) {
    const std::uint64_t before = group.engine(r).driverLaunches();
    REQUIRE(group.engine(r).submit(sumCall(in, out, r, group.stream(r))).launched);
    CHECK(group.engine(r).driverLaunches() == before + 1);
  }
  group.synchronize();
  for (int r = 0; r < kRanks; ++r) CHECK(allEqual(out, r, kRanks * (kRanks + 1) / 2.0));

  out.poison();
  std::vector<cudaGraph_t> graphs(kRanks, nullptr);
  std::vector<std::uint64_t> before(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    before[r] = group.engine(r).driverLaunches();
    CHECK_CUDA(cudaStreamBeginCapture(group.stream(r), cudaStreamCaptureModeThreadLocal));
    REQUIRE(group.engine(r).submit(sumCall(in, out, r, group.stream(r))).launched);
    CHECK_CUDA(cudaStreamEndCapture(group.stream(r), &graphs[r]));
    CHECK(group.engine(r).driverLaunches() == before[r]);
  }
  std::vector<cudaGraphExec_t> execs(kRanks, nullptr);
  for (int r = 0; r < kRanks; ++r) CHECK_CUDA(cudaGraphInstantiate(&execs[r], graphs[r], 0));
  for (int r = 0; r < kRanks; ++r) CHECK_CUDA(cudaGraphLaunch(execs[r], group.stream(r)));
  group.synchronize();
  for (int r = 0; r < kRanks; ++r) {
    CHECK(allEqual(out, r, kRanks * (kRanks + 1) / 2.0));
    CHECK_CUDA(cudaGraphExecDestroy(execs[r]));
    CHECK_CUDA(cudaGraphDestroy(graphs[r]));
  }
}

TEST_CASE("the launch-error test fault: the call is taken and ran, and reports the failure after its launch",
          "[gpu][launch-path]") {
  Config config = smallConfig();
  config.testLaunchFailure = true;
  RankGroup group(kDevice, kRanks, config);
  DeviceBuffers in(kRanks, kCount * 4), out(kRanks, kCount * 4);
  fillInputs(in);
  out.poison();
  for (int r = 0; r < kRanks; ++r) {
    const SubmitResult result = group.engine(r).submit(sumCall(in, out, r, group.stream(r)));
    CHECK(result.launched);
    CHECK(result.error == cudaErrorLaunchFailure);
    CHECK(group.engine(r).stats().taken(result.algorithm) == 1);
  }
  group.synchronize();
  for (int r = 0; r < kRanks; ++r) CHECK(allEqual(out, r, kRanks * (kRanks + 1) / 2.0));
}
