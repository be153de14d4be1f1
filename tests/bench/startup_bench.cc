// What a communicator's set-up costs, through the real NCCL, with or without the library
// preloaded (tests/bench/run_startup_bench.py runs both, one process per rank): the time of
// ncclCommInitRank, of the first all-reduce after it (eager, 1 KiB bf16, until its stream is
// done), and the same for a second communicator split from the first (the cost per
// communicator, once the process has loaded everything it loads once). The ranks start each
// step together (a file barrier), so no rank's process start is counted. One line per rank:
//
//   startup rank=R ranks=N init_ms=.. first_ms=.. split_ms=.. split_first_ms=.. used_mib=..
//
// used_mib: what the GPU holds after both communicators' first all-reduce, less what it held
// before the first init (the whole GPU: under MPS, every rank's process together).
//
// With --groups, what many process groups cost (PyTorch makes a communicator per group):
// after the first communicator (the world), one split per pair of ranks, every rank taking
// part in each split and the pair's two ranks getting the child (the world and every pair,
// 29 communicators at 8 ranks), then a first all-reduce on each of this rank's. One line:
//
//   groups rank=R ranks=N communicators=C splits_ms=.. firsts_ms=.. used_mib=..
//
// C: the job's communicators; splits_ms the time of all splits, firsts_ms of this rank's
// children's first all-reduces; used_mib as above, after all of them.
//
//   car_startup_bench RANK NRANKS ID_FILE [DEVICE] [--groups]
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../e2e/unique_id_file.h"

namespace {

int gRank = 0;

#define STARTUP_CHECK(ok, what)                                                               \
  do {                                                                                        \
    if (!(ok)) {                                                                              \
      std::fprintf(stderr, "car_startup_bench rank %d: %s failed (line %d)\n", gRank, what, __LINE__); \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Every rank writes <id file>.<step>.<rank>, then waits for all of them (up to a minute).
void barrier(const std::string& idFile, const char* step, int rank, int ranks) {
  std::ofstream(idFile + "." + step + "." + std::to_string(rank)) << rank;
  for (int tries = 0; tries < 60000; ++tries) {
    int present = 0;
    for (int r = 0; r < ranks; ++r) present += access((idFile + "." + step + "." + std::to_string(r)).c_str(), F_OK) == 0;
    if (present == ranks) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  STARTUP_CHECK(false, "the barrier");
}

// One eager all-reduce until its stream is done; milliseconds.
double firstAllReduce(ncclComm_t comm, cudaStream_t stream, void* buffer) {
  const Clock::time_point start = Clock::now();
  STARTUP_CHECK(ncclAllReduce(buffer, buffer, 512, ncclBfloat16, ncclSum, comm, stream) == ncclSuccess, "ncclAllReduce");
  STARTUP_CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
  return millisecondsSince(start);
}

double usedMiB() {
  std::size_t free = 0, total = 0;
  STARTUP_CHECK(cudaMemGetInfo(&free, &total) == cudaSuccess, "cudaMemGetInfo");
  return static_cast<double>(total - free) / (1 << 20);
}

// The world and every pair (--groups): see the top of this file.
void measureGroups(ncclComm_t world, int rank, int ranks, const std::string& idFile, cudaStream_t stream, void* buffer,
                   double usedBefore) {
  barrier(idFile, "groups", rank, ranks);
  std::vector<ncclComm_t> mine;
  int communicators = 1;
  const Clock::time_point start = Clock::now();
  for (int a = 0; a < ranks; ++a) {
    for (int b = a + 1; b < ranks; ++b) {
      const bool member = rank == a || rank == b;
      ncclComm_t child = nullptr;
      STARTUP_CHECK(ncclCommSplit(world, member ? 0 : NCCL_SPLIT_NOCOLOR, rank, &child, nullptr) == ncclSuccess,
                    "ncclCommSplit of a pair");
      STARTUP_CHECK(member == (child != nullptr), "the pair's child");
      if (child != nullptr) mine.push_back(child);
      ++communicators;
    }
  }
  const double splitsMs = millisecondsSince(start);
  // Each pair's first all-reduce, in the order of the splits: both ranks of a pair reach
  // theirs in the same order, so no rank waits for a pair its peer has not reached.
  const Clock::time_point firstsStart = Clock::now();
  for (ncclComm_t child : mine) firstAllReduce(child, stream, buffer);
  const double firstsMs = millisecondsSince(firstsStart);
  barrier(idFile, "groups-measured", rank, ranks);
  const double usedAfter = usedMiB();
  std::printf("groups rank=%d ranks=%d communicators=%d splits_ms=%.2f firsts_ms=%.2f used_mib=%.0f\n", rank, ranks,
              communicators, splitsMs, firstsMs, usedAfter - usedBefore);
  std::fflush(stdout);
  barrier(idFile, "groups-done", rank, ranks);
  for (ncclComm_t child : mine) STARTUP_CHECK(ncclCommDestroy(child) == ncclSuccess, "ncclCommDestroy of a pair");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: car_startup_bench RANK NRANKS ID_FILE [DEVICE] [--groups]\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int ranks = std::atoi(argv[2]);
  const std::string idFile = argv[3];
  const bool groups = std::string(argv[argc - 1]) == "--groups";
  const int positional = groups ? argc - 1 : argc;
  gRank = rank;
  STARTUP_CHECK(cudaSetDevice(positional > 4 ? std::atoi(argv[4]) : 0) == cudaSuccess, "cudaSetDevice");
  STARTUP_CHECK(cudaFree(nullptr) == cudaSuccess, "creating the CUDA context");  // not counted
  cudaStream_t stream = nullptr;
  STARTUP_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
  void* buffer = nullptr;
  STARTUP_CHECK(cudaMalloc(&buffer, 1024) == cudaSuccess && cudaMemset(buffer, 0, 1024) == cudaSuccess, "buffer");
  ncclUniqueId id{};
  STARTUP_CHECK(shareUniqueIdThroughFile(rank, idFile, &id), "sharing the unique id");
  barrier(idFile, "init", rank, ranks);
  const double usedBefore = usedMiB();

  Clock::time_point start = Clock::now();
  ncclComm_t comm = nullptr;
  STARTUP_CHECK(ncclCommInitRank(&comm, ranks, id, rank) == ncclSuccess, "ncclCommInitRank");
  const double initMs = millisecondsSince(start);
  const double firstMs = firstAllReduce(comm, stream, buffer);
  if (groups) {
    measureGroups(comm, rank, ranks, idFile, stream, buffer, usedBefore);
    STARTUP_CHECK(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
    cudaFree(buffer);
    return 0;
  }

  barrier(idFile, "split", rank, ranks);
  start = Clock::now();
  ncclComm_t split = nullptr;
  STARTUP_CHECK(ncclCommSplit(comm, 0, rank, &split, nullptr) == ncclSuccess, "ncclCommSplit");
  const double splitMs = millisecondsSince(start);
  const double splitFirstMs = firstAllReduce(split, stream, buffer);
  barrier(idFile, "measured", rank, ranks);
  const double usedAfter = usedMiB();

  std::printf("startup rank=%d ranks=%d init_ms=%.2f first_ms=%.2f split_ms=%.2f split_first_ms=%.2f used_mib=%.0f\n",
              rank, ranks, initMs, firstMs, splitMs, splitFirstMs, usedAfter - usedBefore);
  std::fflush(stdout);
  barrier(idFile, "done", rank, ranks);
  STARTUP_CHECK(ncclCommDestroy(split) == ncclSuccess && ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
  cudaFree(buffer);
  return 0;
}
