// What the library's hook adds to a call it forwards: the host time of ncclAllReduce through
// whatever the process resolves it to (libnccl-car.so when preloaded) against the real NCCL's
// own function on the same communicator (looked up in the loaded libnccl.so.2 itself), in
// alternating samples. Ranks are threads of this process: with one, the communicator is
// adopted but never ours (1 rank); with two or more (the stand-in NCCL with
// STANDIN_NCCL_EXCHANGE=1 and the library over the fake CUDA runtime, tests/fake_cuda/), it
// is set up and Ready, and the calls, above NCCL_CAR_MAX_BYTES, are forwarded by the plan.
// Needs no GPU.
//
//   hook_cost_bench [--ranks N] [--calls N] [--samples N] [--bytes N] [--only hook|direct]
//                   [--evict BYTES]
//
// --only times one side alone, for an instruction count (valgrind --tool=callgrind) of each.
// --evict writes one byte in every 64 of a buffer of BYTES before each call, in both sides
// alike, as the real NCCL's own work between two calls does: the hook then finds its data
// out of the nearer caches (valgrind --tool=cachegrind --cache-sim=yes counts the lines it
// misses).
// Output: "ranks=N bytes=B calls=C samples=S evict=E hook_ns=H direct_ns=D added_ns=A" (medians over
// samples of rank 0's mean per call; added = hook - direct).
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using AllReduce = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);

struct Options {
  int ranks = 1;
  long calls = 20000;
  int samples = 15;
  std::size_t bytes = std::size_t{16} << 20;  // above the default NCCL_CAR_MAX_BYTES: forwarded
  bool hook = true;
  bool direct = true;
  std::size_t evict = 0;
};

// Pushes what the last call touched out of the nearer caches.
void touchEvery64(std::vector<char>* buffer) {
  for (std::size_t i = 0; i < buffer->size(); i += 64) (*buffer)[i] = static_cast<char>((*buffer)[i] + 1);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Mean nanoseconds per call of `calls` calls of `allReduce`.
double timeCalls(AllReduce allReduce, ncclComm_t comm, const Options& options, void* send, void* recv,
                 std::vector<char>* evict) {
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < options.calls; ++i) {
    touchEvery64(evict);
    if (allReduce(send, recv, options.bytes / 4, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
      std::fprintf(stderr, "hook_cost_bench: an all-reduce failed\n");
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(options.calls);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ranks") == 0) options.ranks = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--calls") == 0) options.calls = std::max(1L, std::atol(argv[i + 1]));
    if (std::strcmp(argv[i], "--samples") == 0) options.samples = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--bytes") == 0) options.bytes = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--evict") == 0) options.evict = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--only") == 0) {
      options.hook = std::strcmp(argv[i + 1], "hook") == 0;
      options.direct = std::strcmp(argv[i + 1], "direct") == 0;
    }
  }
  void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (nccl == nullptr) {
    std::fprintf(stderr, "hook_cost_bench: cannot load libnccl.so.2: %s\n", dlerror());
    return 1;
  }
  // The process's ncclAllReduce (the library's hook when it is preloaded), and NCCL's own.
  const auto hooked = reinterpret_cast<AllReduce>(dlsym(RTLD_DEFAULT, "ncclAllReduce"));
  const auto direct = reinterpret_cast<AllReduce>(dlsym(nccl, "ncclAllReduce"));
  const auto getId = reinterpret_cast<decltype(&ncclGetUniqueId)>(dlsym(RTLD_DEFAULT, "ncclGetUniqueId"));
  const auto initRank = reinterpret_cast<decltype(&ncclCommInitRank)>(dlsym(RTLD_DEFAULT, "ncclCommInitRank"));
  const auto destroy = reinterpret_cast<decltype(&ncclCommDestroy)>(dlsym(RTLD_DEFAULT, "ncclCommDestroy"));
  if (hooked == nullptr || direct == nullptr || getId == nullptr || initRank == nullptr || destroy == nullptr) {
    std::fprintf(stderr, "hook_cost_bench: NCCL's functions not found\n");
    return 1;
  }
  ncclUniqueId id;
  if (getId(&id) != ncclSuccess) return 1;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(options.ranks), nullptr);
  {
    std::vector<std::thread> creating;
    for (int r = 0; r < options.ranks; ++r) {
      creating.emplace_back([&, r] { initRank(&comms[static_cast<std::size_t>(r)], options.ranks, id, r); });
    }
    for (std::thread& thread : creating) thread.join();
  }
  std::vector<double> hookSamples, directSamples;
  std::atomic<int> arrived{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < options.ranks; ++r) {
    ranks.emplace_back([&, r] {
      // Host memory: neither the stand-in nor the fake runtime reads it (the real NCCL would
      // need device memory: this bench is for the stand-in).
      std::vector<char> mySend(options.bytes), myRecv(options.bytes), myEvict(options.evict);
      ncclComm_t comm = comms[static_cast<std::size_t>(r)];
      const auto time = [&](bool wanted, AllReduce allReduce) {
        return wanted ? timeCalls(allReduce, comm, options, mySend.data(), myRecv.data(), &myEvict) : 0.0;
      };
      time(options.hook, hooked);  // warm-up
      time(options.direct, direct);
      ++arrived;
      while (arrived.load() < options.ranks) std::this_thread::yield();
      for (int s = 0; s < options.samples; ++s) {
        const double viaHook = time(options.hook, hooked);
        const double alone = time(options.direct, direct);
        if (r == 0) {
          hookSamples.push_back(viaHook);
          directSamples.push_back(alone);
        }
      }
    });
  }
  for (std::thread& thread : ranks) thread.join();
  for (ncclComm_t comm : comms) destroy(comm);
  const double hookNs = median(hookSamples), directNs = median(directSamples);
  std::printf("ranks=%d bytes=%zu calls=%ld samples=%d evict=%zu hook_ns=%.1f direct_ns=%.1f added_ns=%.1f\n",
              options.ranks, options.bytes, options.calls, options.samples, options.evict, hookNs, directNs,
              hookNs - directNs);
  return 0;
}
