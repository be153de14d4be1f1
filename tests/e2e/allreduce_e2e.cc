// End-to-end check through the real NCCL: one process per rank (launched by
// tests/e2e/run_e2e.py), ncclAllReduce of fp16/bf16/fp32 over sizes on both sides of the
// 8 MiB limit, out-of-place and in-place, eager and replayed from a CUDA graph. Inputs are
// small integers, so every sum is exact in every type and every order: any difference
// is an error. Prints one summary line, "rank R/N: C checks (A above 8388608 bytes), W wrong
// (E elements)": the runner expects the library to take every call up to that size (its
// default NCCL_CAR_MAX_BYTES, which the scenarios keep) and to forward the A above it as
// too-large. Exits 1 on any wrong element.
//
//   allreduce_e2e RANK NRANKS ID_FILE [DEVICE]
//   E2E_MAX_BYTES=N skips the larger sizes (for slow runs under compute-sanitizer).
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "unique_id_file.h"

namespace {

#define CHECK(call, what)                                                    \
  do {                                                                       \
    if (!(call)) {                                                           \
      std::fprintf(stderr, "rank %d: %s failed at line %d\n", gRank, what, __LINE__); \
      std::exit(2);                                                          \
    }                                                                        \
  } while (0)

int gRank = 0;

struct TypeCase {
  ncclDataType_t type;
  const char* name;
  int bytes;
};

const TypeCase kTypes[] = {{ncclFloat16, "fp16", 2}, {ncclBfloat16, "bf16", 2}, {ncclFloat32, "fp32", 4}};

// The library's default NCCL_CAR_MAX_BYTES: calls above it go to NCCL.
constexpr std::size_t kLibraryLimit = 8 << 20;

// Below, at and above the 8 MiB limit; multiples of 16 and not; odd element counts.
const std::size_t kSizes[] = {16,      48,      100,     1008,        4096 + 16,    65536, 262144 + 16,
                              1 << 20, 4 << 20, (8 << 20) - 16, 8 << 20, (8 << 20) + 16, 12 << 20};

// Exact small-integer input of rank r at element i; the sum over ranks fits every type.
int inputValue(int rank, std::size_t i) { return static_cast<int>((i * 7 + rank * 3) % 17) - 8; }

void toBits(const TypeCase& t, float value, void* out) {
  if (t.type == ncclFloat16) *static_cast<__half*>(out) = __float2half(value);
  else if (t.type == ncclBfloat16) *static_cast<__nv_bfloat16*>(out) = __float2bfloat16(value);
  else *static_cast<float*>(out) = value;
}

float fromBits(const TypeCase& t, const void* in) {
  if (t.type == ncclFloat16) return __half2float(*static_cast<const __half*>(in));
  if (t.type == ncclBfloat16) return __bfloat162float(*static_cast<const __nv_bfloat16*>(in));
  return *static_cast<const float*>(in);
}

struct Tally {
  int checks = 0;
  int aboveLimit = 0;  // checks of calls larger than kLibraryLimit
  int wrongChecks = 0;
  std::size_t wrongElements = 0;
};

void runCase(ncclComm_t comm, cudaStream_t stream, int rank, int nranks, const TypeCase& t, std::size_t bytes,
             bool inPlace, bool graph, void* sendDev, void* recvDev, Tally& tally) {
  const std::size_t count = bytes / t.bytes;
  std::vector<unsigned char> host(count * t.bytes);
  for (std::size_t i = 0; i < count; ++i) toBits(t, static_cast<float>(inputValue(rank, i)), &host[i * t.bytes]);
  // On the call's stream: a plain cudaMemcpy from pageable memory may return before its DMA
  // has landed, and nothing orders it with a non-blocking stream.
  CHECK(cudaMemcpyAsync(sendDev, host.data(), host.size(), cudaMemcpyHostToDevice, stream) == cudaSuccess, "upload");
  void* out = inPlace ? sendDev : recvDev;
  // On the call's own stream: a cudaMemset on the legacy stream is not ordered with a
  // non-blocking stream and may land after the all-reduce.
  if (!inPlace) CHECK(cudaMemsetAsync(recvDev, 0xFF, host.size(), stream) == cudaSuccess, "poison");

  if (graph) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    CHECK(ncclAllReduce(sendDev, out, count, t.type, ncclSum, comm, stream) == ncclSuccess, "ncclAllReduce (capture)");
    CHECK(cudaStreamEndCapture(stream, &g) == cudaSuccess, "end capture");
    CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
    CHECK(cudaGraphLaunch(exec, stream) == cudaSuccess, "graph launch");
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "graph sync");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  } else {
    CHECK(ncclAllReduce(sendDev, out, count, t.type, ncclSum, comm, stream) == ncclSuccess, "ncclAllReduce");
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync");
  }

  CHECK(cudaMemcpy(host.data(), out, host.size(), cudaMemcpyDeviceToHost) == cudaSuccess, "download");
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    int expected = 0;
    for (int r = 0; r < nranks; ++r) expected += inputValue(r, i);
    const float got = fromBits(t, &host[i * t.bytes]);
    if (got != static_cast<float>(expected) && wrong++ < 3) {
      std::fprintf(stderr, "rank %d: %s %zu bytes: element %zu (pack %zu) is %g, expected %d\n", rank, t.name,
                   bytes, i, i * t.bytes / 16, got, expected);
    }
  }
  ++tally.checks;
  if (count * t.bytes > kLibraryLimit) ++tally.aboveLimit;
  if (wrong != 0) {
    ++tally.wrongChecks;
    tally.wrongElements += wrong;
    std::fprintf(stderr, "rank %d: WRONG %s %zu bytes %s %s: %zu of %zu elements\n", rank, t.name, bytes,
                 inPlace ? "in-place" : "out-of-place", graph ? "graph" : "eager", wrong, count);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: allreduce_e2e RANK NRANKS ID_FILE [DEVICE]\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int nranks = std::atoi(argv[2]);
  const int device = argc > 4 ? std::atoi(argv[4]) : 0;
  gRank = rank;
  const cudaError_t deviceError = cudaSetDevice(device);
  if (deviceError != cudaSuccess) std::fprintf(stderr, "rank %d: %s\n", rank, cudaGetErrorString(deviceError));
  CHECK(deviceError == cudaSuccess, "cudaSetDevice");
  ncclUniqueId id{};
  CHECK(shareUniqueIdThroughFile(rank, argv[3], &id), "sharing the unique id");
  ncclComm_t comm = nullptr;
  CHECK(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "ncclCommInitRank");
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
  const std::size_t largest = 12 << 20;
  void* sendDev = nullptr;
  void* recvDev = nullptr;
  CHECK(cudaMalloc(&sendDev, largest) == cudaSuccess && cudaMalloc(&recvDev, largest) == cudaSuccess, "cudaMalloc");

  const char* maxText = std::getenv("E2E_MAX_BYTES");
  char* maxEnd = nullptr;
  const std::size_t maxBytes = maxText != nullptr ? std::strtoull(maxText, &maxEnd, 10) : largest;
  CHECK(maxText == nullptr || (maxEnd != maxText && *maxEnd == '\0'), "E2E_MAX_BYTES (a whole number of bytes)");
  Tally tally;
  for (const TypeCase& t : kTypes) {
    for (std::size_t bytes : kSizes) {
      if (bytes > maxBytes) continue;
      for (bool inPlace : {false, true}) {
        for (bool graph : {false, true}) runCase(comm, stream, rank, nranks, t, bytes, inPlace, graph, sendDev, recvDev, tally);
      }
    }
  }
  cudaFree(sendDev);
  cudaFree(recvDev);
  cudaStreamDestroy(stream);
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
  std::printf("rank %d/%d: %d checks (%d above %zu bytes), %d wrong (%zu elements)\n", rank, nranks, tally.checks,
              tally.aboveLimit, kLibraryLimit, tally.wrongChecks, tally.wrongElements);
  return tally.wrongChecks == 0 ? 0 : 1;
}
