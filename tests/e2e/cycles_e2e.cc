// Communicator life-cycles through the real NCCL with real IPC peers leave nothing behind.
// One process per rank: a parent communicator is created once; every cycle splits a child
// from it (a new communicator: our set-up, IPC export, peers' handles opened), runs one
// all-reduce that our kernel takes, checks it and destroys the child (our mappings closed,
// our buffers back in the pool, taken again by the next child). After a few warm-up cycles
// it records free device memory, open file
// descriptors and memory mappings, and compares them after the last cycle.
//
// A peer's mapping we forget to close keeps that peer's buffer block (tens of MiB) alive on
// the peer's GPU, so leaks show as device memory that does not come back, on either side.
//
//   cycles_e2e RANK NRANKS ID_FILE CYCLES [DEVICE]
//   prints "rank R: N cycles, device memory +X MiB, fds +Y, mappings +Z" and exits 1 on a leak
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../common/process_counts.h"
#include "unique_id_file.h"

namespace {

constexpr int kWarmUpCycles = 5;
// Each cycle's blocks are 16 MiB and more per rank: one leaked block or mapping exceeds this.
constexpr double kMemoryToleranceMiB = 8.0;
// NCCL and the CUDA runtime may open a few descriptors or mappings lazily.
constexpr long kFdTolerance = 4;
constexpr long kMappingTolerance = 16;

int fail(int rank, const char* what) {
  std::fprintf(stderr, "rank %d: %s failed\n", rank, what);
  return 2;
}

// Every rank has finished its previous cycle (its destroy closed its mappings of our
// block, which only then is really freed): a 4-byte all-reduce on the parent, which NCCL
// runs (not a multiple of 16 bytes), then wait for it.
bool syncRanks(ncclComm_t parent, float* scratch, cudaStream_t stream) {
  return ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, parent, stream) == ncclSuccess &&
         cudaStreamSynchronize(stream) == cudaSuccess;
}

struct Usage {
  double freeMiB = 0;
  long fds = 0;
  long mappings = 0;
};

Usage usageNow() {
  std::size_t freeBytes = 0, totalBytes = 0;
  cudaMemGetInfo(&freeBytes, &totalBytes);
  return Usage{static_cast<double>(freeBytes) / (1 << 20), car::testing::openFileDescriptors(),
               car::testing::memoryMappings()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return fail(-1, "usage: cycles_e2e RANK NRANKS ID_FILE CYCLES [DEVICE];");
  const int rank = std::atoi(argv[1]);
  const int ranks = std::atoi(argv[2]);
  const int cycles = std::atoi(argv[4]);
  const int device = argc > 5 ? std::atoi(argv[5]) : 0;
  if (cudaSetDevice(device) != cudaSuccess) return fail(rank, "cudaSetDevice");
  ncclUniqueId id{};
  if (!shareUniqueIdThroughFile(rank, argv[3], &id)) return fail(rank, "sharing the unique id");
  ncclComm_t parent = nullptr;
  if (ncclCommInitRank(&parent, ranks, id, rank) != ncclSuccess) return fail(rank, "ncclCommInitRank");

  const std::size_t count = 1 << 16;  // 256 KiB of fp32: ours, 1stage
  float* buffer = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&buffer, count * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return fail(rank, "CUDA set-up");
  }
  std::vector<float> host(count);
  Usage before;
  long wrong = 0;
  for (int cycle = 0; cycle < cycles + kWarmUpCycles; ++cycle) {
    if (cycle == kWarmUpCycles) {
      if (!syncRanks(parent, buffer, stream)) return fail(rank, "sync");
      before = usageNow();
    }
    ncclComm_t child = nullptr;
    if (ncclCommSplit(parent, 0, rank, &child, nullptr) != ncclSuccess) return fail(rank, "ncclCommSplit");
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>((rank + 1) * (i % 7 + cycle % 5));
    if (cudaMemcpyAsync(buffer, host.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream) != cudaSuccess ||
        ncclAllReduce(buffer, buffer, count, ncclFloat32, ncclSum, child, stream) != ncclSuccess ||
        cudaMemcpyAsync(host.data(), buffer, count * sizeof(float), cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      return fail(rank, "all-reduce");
    }
    const float rankSum = static_cast<float>(ranks * (ranks + 1) / 2);
    for (std::size_t i = 0; i < count; ++i) {
      if (host[i] != rankSum * static_cast<float>(i % 7 + cycle % 5)) ++wrong;
    }
    if (ncclCommDestroy(child) != ncclSuccess) return fail(rank, "ncclCommDestroy");
    const int done = cycle + 1 - kWarmUpCycles;
    if (done > 0 && done % 100 == 0) {
      if (!syncRanks(parent, buffer, stream)) return fail(rank, "sync");
      const Usage now = usageNow();
      std::printf("rank %d: after %d cycles: device memory %+.1f MiB, fds %+ld, mappings %+ld\n", rank, done,
                  before.freeMiB - now.freeMiB, now.fds - before.fds, now.mappings - before.mappings);
      std::fflush(stdout);
    }
  }
  if (!syncRanks(parent, buffer, stream)) return fail(rank, "sync");
  const Usage after = usageNow();
  ncclCommDestroy(parent);

  const double memoryGrowth = before.freeMiB - after.freeMiB;
  const long fdGrowth = after.fds - before.fds;
  const long mappingGrowth = after.mappings - before.mappings;
  std::printf("rank %d: %d cycles, %ld wrong elements, device memory +%.1f MiB, fds %+ld, mappings %+ld\n", rank,
              cycles, wrong, memoryGrowth, fdGrowth, mappingGrowth);
  const bool leaked =
      memoryGrowth > kMemoryToleranceMiB || fdGrowth > kFdTolerance || mappingGrowth > kMappingTolerance;
  return wrong == 0 && !leaked ? 0 : 1;
}
