// Creating a communicator must not wait for the program's own GPU work: a communicator we
// do not take must cost nothing, and one we take no more waiting than NCCL's own creation.
// Each rank first creates a communicator (which loads NCCL's and our kernels), then starts
// a kernel that spins until the host sets a flag, on a stream of its own (`user`) or on the
// legacy default stream (`legacy`), and then splits that communicator (ncclCommSplit) and
// creates a second one (ncclCommInitRank), checking for each call that it returned while
// the kernel still spun. A watchdog releases the kernel after 20 s, so a call that waits for
// it ends and is reported. Then the flag is set and an all-reduce on every communicator is
// checked, and the split and the second communicator are destroyed while another such kernel
// spins (a release must not wait for the program's work either). The runner runs it with
// NCCL alone (the reference: which of these calls NCCL itself makes without waiting), and
// with the library on communicators it takes and on ones it does not (a checked setting that
// differs between the ranks).
// Prints "rank R: creation (STREAM): split returned with|after the kernel (T s); init
// returned with|after the kernel (T s); sums right|WRONG; destroy returned with|after the
// kernel (T s)" and exits 0 when the sums are right and the destroys succeeded (the runner
// judges the rest against NCCL alone), else 1.
//
//   creation_e2e RANK NRANKS ID_FILE user|legacy
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "unique_id_file.h"

namespace {

constexpr double kWatchdogSeconds = 20;
constexpr std::size_t kCount = 4096;

__global__ void spinUntilSet(volatile int* flag) {
  while (*flag == 0) {
  }
}

using Clock = std::chrono::steady_clock;

// Sets the flag after kWatchdogSeconds unless stopped first: a creation that waits for the
// spinning kernel then returns late instead of never.
class Watchdog {
 public:
  explicit Watchdog(volatile int* flag)
      : thread_([this, flag] {
          const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(kWatchdogSeconds * 1000));
          while (!stop_.load() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          if (!stop_.load()) {
            fired_.store(true);
            *flag = 1;
          }
        }) {}
  ~Watchdog() { stopNow(); }
  void stopNow() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  bool fired() const { return fired_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

std::string seconds(Clock::time_point start) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f s", std::chrono::duration<double>(Clock::now() - start).count());
  return text;
}

// Whether the all-reduce of every rank's (rank + 1) * (i % 5) sums right.
bool sumsRight(ncclComm_t comm, int rank, int ranks, cudaStream_t stream) {
  std::vector<float> host(kCount);
  for (std::size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>((rank + 1) * (i % 5));
  float* buffer = nullptr;
  if (cudaMalloc(&buffer, kCount * sizeof(float)) != cudaSuccess) return false;
  cudaMemcpy(buffer, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice);
  const bool called = ncclAllReduce(buffer, buffer, kCount, ncclFloat32, ncclSum, comm, stream) == ncclSuccess;
  const bool synced = cudaStreamSynchronize(stream) == cudaSuccess;
  cudaMemcpy(host.data(), buffer, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(buffer);
  const float weight = static_cast<float>(ranks * (ranks + 1) / 2);
  for (std::size_t i = 0; i < kCount; ++i) {
    if (host[i] != weight * static_cast<float>(i % 5)) return false;
  }
  return called && synced;
}

// Starts a kernel that spins on `stream` until the flag is set (by the watchdog after 20 s, or
// here), runs `create`, and says whether it returned while the kernel still spun, and how
// long it took. Each call gets a kernel of its own, so one that waited does not make the next
// look as if it had.
template <typename Create>
std::string whileSpinning(volatile int* flag, int* deviceFlag, cudaStream_t stream, Create&& create, bool* ok) {
  *flag = 0;
  spinUntilSet<<<1, 1, 0, stream>>>(deviceFlag);
  if (cudaGetLastError() != cudaSuccess) {
    *ok = false;
    return "(the spinning kernel did not start)";
  }
  Watchdog watchdog(flag);
  const Clock::time_point start = Clock::now();
  *ok = create() == ncclSuccess;
  const bool spinning = *flag == 0;
  const std::string took = seconds(start);
  watchdog.stopNow();
  *flag = 1;
  *ok = cudaStreamSynchronize(stream) == cudaSuccess && *ok;
  return std::string(spinning ? "with" : "after") + " the kernel (" + took + ")";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: creation_e2e RANK NRANKS ID_FILE user|legacy\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int ranks = std::atoi(argv[2]);
  const std::string where = argv[4];
  if (cudaSetDevice(0) != cudaSuccess) return 2;
  int* flag = nullptr;
  if (cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped) != cudaSuccess) return 2;
  *flag = 0;
  int* deviceFlag = nullptr;
  cudaHostGetDevicePointer(&deviceFlag, flag, 0);
  cudaStream_t user = nullptr;
  cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking);
  ncclUniqueId firstId{}, secondId{};
  if (!shareUniqueIdThroughFile(rank, argv[3], &firstId)) return 2;
  if (!shareUniqueIdThroughFile(rank, std::string(argv[3]) + ".second", &secondId)) return 2;
  ncclComm_t first = nullptr;
  if (ncclCommInitRank(&first, ranks, firstId, rank) != ncclSuccess) return 2;

  const cudaStream_t spinStream = where == "legacy" ? cudaStreamLegacy : user;
  ncclComm_t child = nullptr, second = nullptr;
  bool splitOk = false, initOk = false;
  const std::string split = whileSpinning(flag, deviceFlag, spinStream,
                                          [&] { return ncclCommSplit(first, 0, rank, &child, nullptr); }, &splitOk);
  const std::string init = whileSpinning(flag, deviceFlag, spinStream,
                                         [&] { return ncclCommInitRank(&second, ranks, secondId, rank); }, &initOk);
  const bool spun = cudaDeviceSynchronize() == cudaSuccess;

  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const bool sums = spun && splitOk && initOk && child != nullptr && sumsRight(first, rank, ranks, stream) &&
                    sumsRight(child, rank, ranks, stream) && sumsRight(second, rank, ranks, stream);
  bool destroyOk = false;
  const std::string destroy = whileSpinning(flag, deviceFlag, spinStream, [&] {
    const ncclResult_t ofChild = child != nullptr ? ncclCommDestroy(child) : ncclSuccess;
    const ncclResult_t ofSecond = second != nullptr ? ncclCommDestroy(second) : ncclSuccess;
    return ofChild != ncclSuccess ? ofChild : ofSecond;
  }, &destroyOk);
  ncclCommDestroy(first);
  cudaStreamDestroy(stream);
  cudaStreamDestroy(user);
  cudaFreeHost(flag);
  std::printf("rank %d: creation (%s): split returned %s; init returned %s; sums %s; destroy returned %s\n", rank,
              where.c_str(), split.c_str(), init.c_str(), sums ? "right" : "WRONG", destroy.c_str());
  return sums && destroyOk ? 0 : 1;
}
