// Creating and destroying engines leaks nothing: 1,000 create / all-reduce / destroy
// cycles leave the device's free memory where it started. Releasing them waits for none of
// the program's work: a block's memory and an engine's abort word are kept for the next
// ones (shim/ipc/block_memory.h, plugin/abort_words.h), never cudaFree'd.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "abort_words.h"
#include "check_kernels.h"
#include "device_buffers.h"
#include "host_gate.h"
#include "rank_group.h"

using namespace car;
using namespace car::testing;

TEST_CASE("1,000 create / all-reduce / destroy cycles leak no device memory", "[gpu][leak]") {
  constexpr int kDevice = 0;
  constexpr int kRanks = 4;
  constexpr std::size_t kCount = 4096;
  CHECK_CUDA(cudaSetDevice(kDevice));
  DeviceBuffers in(kRanks, kCount * 4), out(kRanks, kCount * 4);
  Config config;
  config.maxBytes = 1 << 20;
  config.maxBlocks = coResidentBlockLimit(kDevice, kRanks);
  { RankGroup warmUp(kDevice, kRanks, config); }  // first-use allocations of the runtime
  std::size_t freeBefore = 0, total = 0;
  CHECK_CUDA(cudaMemGetInfo(&freeBefore, &total));
  for (int cycle = 0; cycle < 1000; ++cycle) {
    RankGroup group(kDevice, kRanks, config);
    std::string why;
    const bool launched = group.allReduce(in.constPointers(), out.pointers(), kCount, ElementType::Float32, &why);
    INFO("cycle " << cycle << ": " << why);
    REQUIRE(launched);
    group.synchronize();
  }
  std::size_t freeAfter = 0;
  CHECK_CUDA(cudaMemGetInfo(&freeAfter, &total));
  // Each cycle allocates 4 blocks of 2 MiB; a leak of one cycle would show as >= 8 MiB.
  CHECK(freeAfter + (std::size_t{2} << 20) >= freeBefore);
}

TEST_CASE("releasing engines and blocks returns while the program's kernel holds its stream or the legacy stream",
          "[gpu][release]") {
  constexpr int kDevice = 0;
  constexpr int kRanks = 2;
  constexpr std::size_t kCount = 4096;
  constexpr auto kWatchdog = std::chrono::seconds(10);
  CHECK_CUDA(cudaSetDevice(kDevice));
  DeviceBuffers in(kRanks, kCount * 4), out(kRanks, kCount * 4);
  Config config;
  config.maxBlocks = coResidentBlockLimit(kDevice, kRanks);
  cudaStream_t user = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking));
  for (const cudaStream_t held : {user, cudaStreamLegacy}) {
    INFO((held == user ? "a stream of the program's" : "the legacy stream"));
    auto group = std::make_unique<RankGroup>(kDevice, kRanks, config);
    std::string why;
    REQUIRE(group->allReduce(in.constPointers(), out.pointers(), kCount, ElementType::Float32, &why));
    group->synchronize();
    Gate gate;
    CHECK_CUDA(launchGate(gate.word(), held));
    // Opens the gate after kWatchdog if the release waited for the kernel, so it ends.
    std::atomic<bool> released{false};
    std::thread watchdog([&] {
      const auto deadline = std::chrono::steady_clock::now() + kWatchdog;
      while (!released.load() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      gate.open();
    });
    const int wordsKept = keptAbortWords();
    group.reset();  // engines drained (their kernels are done), blocks retired
    const bool returnedWhileHeld = !gate.isOpen();
    CHECK(keptAbortWords() == wordsKept + kRanks);  // kept for the next engines, not freed
    released.store(true);
    watchdog.join();
    CHECK(returnedWhileHeld);
    CHECK_CUDA(cudaStreamSynchronize(held));
  }
  CHECK_CUDA(cudaStreamDestroy(user));
}
