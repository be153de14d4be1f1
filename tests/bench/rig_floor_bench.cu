// The floor of the several-ranks-on-one-GPU rig: what a graph of calls costs per call when
// every rank's kernel does nothing ("empty") or only meets its peers ("meet": each rank
// stores the call's number and spins until every rank has stored it), shaped as car_bench
// shapes ours (one stream per rank, PDL, fork/join, CUDA graph). No all-reduce can take less
// per call than "meet" on this rig; ours at 1 KiB is the figure to hold against it.
//
//   car_rig_floor_bench [--ranks 2,4,8] [--blocks N] [--pdl 0|1]
//
// --blocks: the grid of "empty" and "meet", and the cap on ours (car_bench's at 8 ranks: 8).
//
// Each kernel also runs with an argument as large as ours (car::LaunchArgs, "+args"): what
// the size of a kernel node's parameters costs the graph. "1shot" is our bf16 1shot kernel
// itself, on buffers set up here as the engine sets them up, without the engine: what our
// kernel costs in this graph, apart from the library's launch path.
//
// Output: one line per world size and kernel: "ranks,kernel,blocks,pdl,graph_us" (median
// over samples of the replay time per call).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "all_reduce.h"
#include "dispatch.cuh"
#include "geometry.h"
#include "pdl.cuh"

namespace {

#define FLOOR_OK(call)                                                                              \
  do {                                                                                              \
    const cudaError_t floorError = (call);                                                          \
    if (floorError != cudaSuccess) {                                                                \
      std::fprintf(stderr, "car_rig_floor_bench: %s: %s (line %d)\n", #call, cudaGetErrorString(floorError), \
                   __LINE__);                                                                       \
      std::exit(2);                                                                                 \
    }                                                                                               \
  } while (0)

constexpr int kCallsPerGraph = 20;  // as car_bench
constexpr int kSamples = 15;
constexpr int kThreads = 128;

// No extra argument, or one of our kernels' size.
struct NoArgument {};
using OurArgument = car::LaunchArgs;

template <typename Extra>
__global__ void emptyKernel(int rank, int ranks, unsigned* posted, Extra) {
  car::waitForPreviousGrid();
  car::allowNextGrid();
  if (ranks < 0) posted[rank] = 0;  // never true: keeps the arguments alive
}

// Block 0 posts this rank's next call number and waits until every rank has posted it. The
// numbers only rise (a rank's own post is its call counter), so the graph replays as is.
template <typename Extra>
__global__ void meetKernel(int rank, int ranks, unsigned* posted, Extra) {
  car::waitForPreviousGrid();
  car::allowNextGrid();
  if (blockIdx.x != 0) return;
  const unsigned call = *static_cast<volatile unsigned*>(posted + rank) + 1;
  __syncthreads();
  if (threadIdx.x == 0) atomicExch(posted + rank, call);
  if (threadIdx.x >= ranks) return;
  const volatile unsigned* peer = posted + threadIdx.x;
  while (*peer < call) {
  }
}

template <typename Extra>
using FloorKernel = void (*)(int, int, unsigned*, Extra);

struct Options {
  std::vector<int> ranks = {2, 4, 8};
  int blocks = 8;
  bool pdl = true;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// `launch(rank, stream)` enqueues one rank's kernel of one call.
template <typename Launch>
double graphMicros(int ranks, const Launch& launch) {
  std::vector<cudaStream_t> streams(ranks);
  std::vector<cudaEvent_t> joins(ranks);
  for (int r = 0; r < ranks; ++r) {
    FLOOR_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    FLOOR_OK(cudaEventCreateWithFlags(&joins[r], cudaEventDisableTiming));
  }
  cudaEvent_t start, stop;
  FLOOR_OK(cudaEventCreate(&start));
  FLOOR_OK(cudaEventCreate(&stop));
  auto capture = [&]() {
    cudaStream_t origin = streams[0];
    FLOOR_OK(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
    FLOOR_OK(cudaEventRecord(joins[0], origin));
    for (int r = 1; r < ranks; ++r) FLOOR_OK(cudaStreamWaitEvent(streams[r], joins[0], 0));
    for (int c = 0; c < kCallsPerGraph; ++c) {
      for (int r = 0; r < ranks; ++r) FLOOR_OK(launch(r, streams[r]));
    }
    for (int r = 1; r < ranks; ++r) {
      FLOOR_OK(cudaEventRecord(joins[r], streams[r]));
      FLOOR_OK(cudaStreamWaitEvent(origin, joins[r], 0));
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    FLOOR_OK(cudaStreamEndCapture(origin, &graph));
    FLOOR_OK(cudaGraphInstantiate(&exec, graph, 0));
    FLOOR_OK(cudaGraphDestroy(graph));
    return exec;
  };
  cudaGraphExec_t exec = capture();
  std::vector<double> samples;
  FLOOR_OK(cudaGraphLaunch(exec, streams[0]));  // warm-up
  for (int s = 0; s < kSamples; ++s) {
    FLOOR_OK(cudaEventRecord(start, streams[0]));
    FLOOR_OK(cudaGraphLaunch(exec, streams[0]));
    FLOOR_OK(cudaEventRecord(stop, streams[0]));
    FLOOR_OK(cudaEventSynchronize(stop));
    float ms = 0;
    FLOOR_OK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(ms * 1000.0 / kCallsPerGraph);
  }
  FLOOR_OK(cudaGraphExecDestroy(exec));
  for (int r = 0; r < ranks; ++r) {
    FLOOR_OK(cudaStreamDestroy(streams[r]));
    FLOOR_OK(cudaEventDestroy(joins[r]));
  }
  FLOOR_OK(cudaEventDestroy(start));
  FLOOR_OK(cudaEventDestroy(stop));
  return median(samples);
}

template <typename Extra>
double floorMicros(FloorKernel<Extra> kernel, int ranks, const Options& options, unsigned* posted) {
  FLOOR_OK(cudaMemset(posted, 0, car::kMaxRanks * sizeof(unsigned)));
  return graphMicros(ranks, [&](int rank, cudaStream_t stream) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(options.blocks));
    config.blockDim = dim3(kThreads);
    config.stream = stream;
    config.attrs = options.pdl ? &attribute : nullptr;
    config.numAttrs = options.pdl ? 1 : 0;
    return cudaLaunchKernelEx(&config, kernel, rank, ranks, posted, Extra{});
  });
}

__global__ void fillWords(std::uint32_t* words, std::size_t count, std::uint32_t value) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    words[i] = value;
  }
}

car::CollectiveKernel oneShotBf16(int ranks) {
  switch (ranks) {
    case 2: return car::oneShotPushKernelOf<__nv_bfloat16, 2>();
    case 3: return car::oneShotPushKernelOf<__nv_bfloat16, 3>();
    case 4: return car::oneShotPushKernelOf<__nv_bfloat16, 4>();
    case 5: return car::oneShotPushKernelOf<__nv_bfloat16, 5>();
    case 6: return car::oneShotPushKernelOf<__nv_bfloat16, 6>();
    case 7: return car::oneShotPushKernelOf<__nv_bfloat16, 7>();
    default: return car::oneShotPushKernelOf<__nv_bfloat16, 8>();
  }
}

// Our 1shot over `bytes` of bf16 ones, each rank's buffers laid out as the engine lays them
// out (PushState zeroed, three areas of sentinels); blocks and threads as the engine picks
// them under the rig's cap. Every rank's output is checked after the replays.
double oneShotMicros(int ranks, std::size_t bytes, const Options& options) {
  const long long packs = car::packsOf(static_cast<long long>(bytes));
  const std::size_t areaBytes = car::oneShotAreaUse(packs, ranks);
  const std::size_t stateBytes = (sizeof(car::PushState) + 255) / 256 * 256;
  std::vector<char*> blocks(ranks), inputs(ranks), outputs(ranks);
  car::LaunchArgs common;
  for (int r = 0; r < ranks; ++r) {
    FLOOR_OK(cudaMalloc(&blocks[r], stateBytes + car::kPushAreas * areaBytes));
    FLOOR_OK(cudaMemset(blocks[r], 0, stateBytes));
    fillWords<<<64, 256>>>(reinterpret_cast<std::uint32_t*>(blocks[r] + stateBytes),
                           car::kPushAreas * areaBytes / 4, 0x80000000u);
    FLOOR_OK(cudaMalloc(&inputs[r], bytes));
    FLOOR_OK(cudaMalloc(&outputs[r], bytes));
    fillWords<<<64, 256>>>(reinterpret_cast<std::uint32_t*>(inputs[r]), bytes / 4, 0x3F803F80u);  // bf16 1.0
    common.peers.areas[r] = blocks[r] + stateBytes;
  }
  FLOOR_OK(cudaDeviceSynchronize());
  common.areaBytes = areaBytes;
  common.bytes = static_cast<long long>(bytes);
  common.packs = packs;
  common.ranks = ranks;
  common.blocks = car::pushGridBlocks(packs, false, options.blocks);
  common.threads = car::pushBlockThreads(packs, false, common.blocks);
  common.type = car::ElementType::BFloat16;
  common.op = car::ReduceOp::Sum;
  common.algorithm = car::Algorithm::OneShotPush;
  common.pdl = options.pdl;
  const car::CollectiveKernel kernel = oneShotBf16(ranks);
  const double micros = graphMicros(ranks, [&](int rank, cudaStream_t stream) {
    car::LaunchArgs args = common;
    args.rank = rank;
    args.pushState = reinterpret_cast<car::PushState*>(blocks[rank]);
    args.input = inputs[rank];
    args.output = outputs[rank];
    return car::launchGrid(kernel, car::launchShapeOf(args), args, stream);
  });
  std::vector<std::uint16_t> got(bytes / 2);
  // The sum of `ranks` ones, exact in bf16: the top half of the float's bits.
  const float sum = static_cast<float>(ranks);
  std::uint32_t sumBits = 0;
  std::memcpy(&sumBits, &sum, sizeof(sumBits));
  const std::uint16_t expected = static_cast<std::uint16_t>(sumBits >> 16);
  for (int r = 0; r < ranks; ++r) {
    FLOOR_OK(cudaMemcpy(got.data(), outputs[r], bytes, cudaMemcpyDeviceToHost));
    for (std::uint16_t value : got) {
      if (value != expected) {
        std::fprintf(stderr, "car_rig_floor_bench: 1shot rank %d wrote 0x%04x, not 0x%04x\n", r, value, expected);
        std::exit(3);
      }
    }
    FLOOR_OK(cudaFree(blocks[r]));
    FLOOR_OK(cudaFree(inputs[r]));
    FLOOR_OK(cudaFree(outputs[r]));
  }
  return micros;
}

std::vector<int> parseList(const char* text) {
  std::vector<int> values;
  for (const char* p = text; *p != '\0';) {
    values.push_back(std::atoi(p));
    const char* comma = std::strchr(p, ',');
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ranks") == 0) options.ranks = parseList(argv[i + 1]);
    else if (std::strcmp(argv[i], "--blocks") == 0) options.blocks = std::max(1, std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--pdl") == 0) options.pdl = std::atoi(argv[i + 1]) != 0;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("# no CUDA device: nothing to time\n");
    return 77;
  }
  FLOOR_OK(cudaSetDevice(0));
  unsigned* posted = nullptr;
  FLOOR_OK(cudaMalloc(&posted, car::kMaxRanks * sizeof(unsigned)));
  std::printf("# car_rig_floor_bench: %d calls per graph, median of %d replays\nranks,kernel,blocks,pdl,graph_us\n",
              kCallsPerGraph, kSamples);
  auto report = [&](int ranks, const char* name, auto kernel) {
    std::printf("%d,%s,%d,%d,%.2f\n", ranks, name, options.blocks, options.pdl ? 1 : 0,
                floorMicros(kernel, ranks, options, posted));
  };
  for (int ranks : options.ranks) {
    if (ranks < 1 || ranks > car::kMaxRanks) continue;
    report(ranks, "empty", &emptyKernel<NoArgument>);
    report(ranks, "meet", &meetKernel<NoArgument>);
    report(ranks, "empty+args", &emptyKernel<OurArgument>);
    report(ranks, "meet+args", &meetKernel<OurArgument>);
    for (std::size_t bytes : {std::size_t{1} << 10, std::size_t{16} << 10}) {
      if (ranks < car::kMinRanks) break;  // our kernels start there
      std::printf("%d,1shot %zu KiB,%d,%d,%.2f\n", ranks, bytes >> 10, options.blocks, options.pdl ? 1 : 0,
                  oneShotMicros(ranks, bytes, options));
    }
  }
  FLOOR_OK(cudaFree(posted));
  return 0;
}
