// Scenario "threads <n> <iterations>": n threads at once, each creating a 1-rank
// communicator, all-reducing on it three times and destroying it, `iterations` times.
// No markers (the threads interleave); the stand-in's tid field tells them apart.
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "driver_common.h"

namespace driver {
namespace {

int oneThread(int iterations) {
  int failures = 0;
  alignas(256) static thread_local char buffer[2][4096];
  for (int i = 0; i < iterations; ++i) {
    ncclUniqueId id{};
    ncclComm_t comm = nullptr;
    failures += ncclGetUniqueId(&id) != ncclSuccess;
    failures += ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess;
    failures += ncclAllReduce(buffer[0], buffer[1], 256, ncclFloat32, ncclSum, comm, fakeStream()) != ncclSuccess;
    failures += ncclAllReduce(buffer[0], buffer[1], 256, ncclFloat32, ncclMax, comm, fakeStream()) != ncclSuccess;
    failures += ncclAllReduce(buffer[0] + 4, buffer[1], 255, ncclFloat32, ncclSum, comm, fakeStream()) != ncclSuccess;
    failures += ncclCommDestroy(comm) != ncclSuccess;
  }
  return failures;
}

}  // namespace

int runThreads(int threads, int iterations) {
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&failures, iterations] { failures += oneThread(iterations); });
  }
  for (std::thread& thread : pool) thread.join();
  std::printf("threads failures=%d\n", failures.load());
  return failures.load() == 0 ? 0 : 1;
}

}  // namespace driver
