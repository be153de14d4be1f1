// ncclCommAbort releases a rank spinning in our barrier. Two ranks (one process each):
// rank 1 joins the communicator but never calls the all-reduce; rank 0 calls it (taken by
// our kernel, which then waits for rank 1 forever) and a watchdog thread calls
// ncclCommAbort after one second, as PyTorch's watchdog would. Rank 0 must find its
// all-reduce still running at the abort and get control back, without error, within a few
// seconds after it. That the kernel was ours the runner reads in the library's log.
//
//   abort_e2e RANK ID_FILE   rank 0 prints "rank 0: watchdog found the all-reduce still
//                            running; ncclCommAbort -> 0" and "rank 0: stream returned
//                            (no error) N.NN s after the abort"
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "unique_id_file.h"

namespace {

using Clock = std::chrono::steady_clock;

int fail(int rank, const char* what) {
  std::fprintf(stderr, "rank %d: %s failed\n", rank, what);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail(-1, "usage: abort_e2e RANK ID_FILE;");
  const int rank = std::atoi(argv[1]);
  if (cudaSetDevice(0) != cudaSuccess) return fail(rank, "cudaSetDevice");
  ncclUniqueId id{};
  if (!shareUniqueIdThroughFile(rank, argv[2], &id)) return fail(rank, "sharing the unique id");
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return fail(rank, "ncclCommInitRank");

  if (rank == 1) {
    // Never joins: stays alive long enough for rank 0's watchdog, then leaves.
    std::this_thread::sleep_for(std::chrono::seconds(8));
    ncclCommAbort(comm);
    std::printf("rank 1: left without joining\n");
    return 0;
  }

  const std::size_t count = 1 << 16;  // 256 KiB of fp32: ours, 1stage
  void* buffer = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&buffer, count * 4) != cudaSuccess || cudaMemset(buffer, 0, count * 4) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return fail(rank, "CUDA set-up");
  }
  if (ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, comm, stream) != ncclSuccess) {
    return fail(rank, "ncclAllReduce");
  }
  std::atomic<long long> abortedAt{0};
  std::atomic<bool> runningAtAbort{false};
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    // Still running: the all-reduce is the one waiting for rank 1, not one already done.
    runningAtAbort = cudaStreamQuery(stream) == cudaErrorNotReady;
    abortedAt = Clock::now().time_since_epoch().count();
    const ncclResult_t result = ncclCommAbort(comm);
    std::printf("rank 0: watchdog found the all-reduce %s; ncclCommAbort -> %d\n",
                runningAtAbort ? "still running" : "already finished", static_cast<int>(result));
  });
  const cudaError_t synced = cudaStreamSynchronize(stream);  // blocks until our kernel returns
  const auto returned = Clock::now().time_since_epoch().count();
  watchdog.join();
  // Negative when the stream returned before the abort: then nothing was waiting for it.
  const double seconds = std::chrono::duration<double>(Clock::duration(returned - abortedAt.load())).count();
  std::printf("rank 0: stream returned (%s) %.2f s after the abort\n", cudaGetErrorString(synced), seconds);
  return runningAtAbort && synced == cudaSuccess && seconds >= 0 && seconds < 5.0 ? 0 : 1;
}
