// What each CUDA (and NCCL) call on the eager path of one of our all-reduces costs the host,
// one by one, on this machine: the numbers behind the host-time budget (issue: at most half
// of NCCL's host time per call). No communicator of ours: an empty kernel whose one argument
// has the size of our LaunchArgs stands in for ours.
//
//   car_launch_cost_bench [--calls N] [--samples N]
//
// Output: one line per step, "name,median_us" (median over samples of the mean per call).
// Between samples the stream is drained, so launches never wait for a full queue.
#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../../kernels/all_reduce.h"

namespace {

#define BENCH_OK(ok, what)                                                   \
  do {                                                                       \
    if (!(ok)) {                                                             \
      std::fprintf(stderr, "car_launch_cost_bench: %s failed (line %d)\n", what, __LINE__); \
      std::exit(2);                                                          \
    }                                                                        \
  } while (0)

__global__ void emptyKernel(car::LaunchArgs args) {
  if (args.ranks < 0) args.blocks = 0;  // never true: keeps the argument alive
}

// The same with an 8-byte argument: what the argument's size costs a launch.
__global__ void emptyKernelSmall(const car::LaunchArgs* args) {
  if (args == nullptr) return;
}

using DriverLaunch = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using DriverIsCapturing = CUresult (*)(CUstream, CUstreamCaptureStatus*);
using DriverGetId = CUresult (*)(CUstream, unsigned long long*);
using DriverEventRecord = CUresult (*)(CUevent, CUstream);

template <typename Function>
Function driverEntry(const char* name) {
  cudaDriverEntryPointQueryResult found{};
  void* entry = nullptr;
  const bool ok = cudaGetDriverEntryPointByVersion(name, &entry, 12000, cudaEnableDefault, &found) == cudaSuccess &&
                  found == cudaDriverEntryPointSuccess && entry != nullptr;
  if (!ok) {
    std::fprintf(stderr, "car_launch_cost_bench: no driver entry point %s\n", name);
    std::exit(2);
  }
  return reinterpret_cast<Function>(entry);
}

struct Rig {
  cudaStream_t stream = nullptr;
  cudaStream_t other = nullptr;
  cudaEvent_t event = nullptr;
  cudaEvent_t otherEvent = nullptr;
  ncclComm_t comm = nullptr;
  car::LaunchArgs args{};
  CUfunction function = nullptr;
  DriverLaunch driverLaunch = nullptr;
  DriverIsCapturing isCapturing = nullptr;
  DriverGetId getId = nullptr;
  DriverEventRecord eventRecord = nullptr;
};

cudaError_t launchRuntime(Rig& rig, bool pdl) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1);
  config.blockDim = dim3(128);
  config.stream = rig.stream;
  cudaLaunchAttribute attribute{};
  if (pdl) {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&config, emptyKernel, rig.args);
}

CUresult launchDriver(Rig& rig) {
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 128;
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = rig.stream;
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attribute.value.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  void* params[] = {&rig.args};
  return rig.driverLaunch(&config, rig.function, params, nullptr);
}

// The steps of RankEngine::enqueue on the eager path, in its order.
void enqueueLikeOurs(Rig& rig, bool record) {
  int device = -1;
  cudaGetDevice(&device);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(rig.stream, &status);
  unsigned long long id = 0;
  cudaStreamGetId(rig.stream, &id);
  cudaGetLastError();
  launchRuntime(rig, true);
  if (record) cudaEventRecord(rig.event, rig.stream);
}

// The same steps, the stream queries, the launch and the record through the driver.
void enqueueThroughDriver(Rig& rig) {
  int device = -1;
  cudaGetDevice(&device);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  rig.isCapturing(reinterpret_cast<CUstream>(rig.stream), &status);
  unsigned long long id = 0;
  rig.getId(reinterpret_cast<CUstream>(rig.stream), &id);
  cudaGetLastError();
  launchDriver(rig);
  rig.eventRecord(reinterpret_cast<CUevent>(rig.event), reinterpret_cast<CUstream>(rig.stream));
}

double medianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double timeStep(Rig& rig, int calls, int samples, const std::function<void()>& step) {
  for (int i = 0; i < calls; ++i) step();  // warm-up
  BENCH_OK(cudaDeviceSynchronize() == cudaSuccess, "warm-up");
  std::vector<double> perCall;
  for (int s = 0; s < samples; ++s) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) step();
    perCall.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
                      calls);
    BENCH_OK(cudaDeviceSynchronize() == cudaSuccess, "a sample");
  }
  (void)rig;
  return medianOf(perCall);
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 400;
  int samples = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--samples") == 0) samples = std::max(1, std::atoi(argv[i + 1]));
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("# no CUDA device: nothing to time\n");
    return 77;
  }
  Rig rig;
  BENCH_OK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
  BENCH_OK(cudaStreamCreateWithFlags(&rig.stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
  BENCH_OK(cudaStreamCreateWithFlags(&rig.other, cudaStreamNonBlocking) == cudaSuccess, "stream");
  BENCH_OK(cudaEventCreateWithFlags(&rig.event, cudaEventDisableTiming) == cudaSuccess, "event");
  BENCH_OK(cudaEventCreateWithFlags(&rig.otherEvent, cudaEventDisableTiming) == cudaSuccess, "event");
  BENCH_OK(cudaEventRecord(rig.otherEvent, rig.other) == cudaSuccess, "event record");
  int one = 0;
  BENCH_OK(ncclCommInitAll(&rig.comm, 1, &one) == ncclSuccess, "ncclCommInitAll");
  rig.args.ranks = 2;
  rig.driverLaunch = driverEntry<DriverLaunch>("cuLaunchKernelEx");
  rig.isCapturing = driverEntry<DriverIsCapturing>("cuStreamIsCapturing");
  rig.getId = driverEntry<DriverGetId>("cuStreamGetId");
  rig.eventRecord = driverEntry<DriverEventRecord>("cuEventRecord");
  const car::LaunchArgs* argsOnDevice = nullptr;
  cudaFunction_t function = nullptr;
  BENCH_OK(cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(&emptyKernel)) == cudaSuccess, "function");
  rig.function = reinterpret_cast<CUfunction>(function);

  struct Step {
    const char* name;
    std::function<void()> body;
  };
  const std::vector<Step> steps = {
      {"cudaGetDevice", [&] { int d; cudaGetDevice(&d); }},
      {"cudaSetDevice(same)", [&] { cudaSetDevice(0); }},
      {"cudaStreamIsCapturing", [&] { cudaStreamCaptureStatus s; cudaStreamIsCapturing(rig.stream, &s); }},
      {"cuStreamIsCapturing", [&] { CUstreamCaptureStatus s; rig.isCapturing(reinterpret_cast<CUstream>(rig.stream), &s); }},
      {"cudaStreamGetId", [&] { unsigned long long id; cudaStreamGetId(rig.stream, &id); }},
      {"cuStreamGetId", [&] { unsigned long long id; rig.getId(reinterpret_cast<CUstream>(rig.stream), &id); }},
      {"cudaGetLastError", [&] { cudaGetLastError(); }},
      {"ncclCommGetAsyncError", [&] { ncclResult_t r; ncclCommGetAsyncError(rig.comm, &r); }},
      {"cudaEventRecord", [&] { cudaEventRecord(rig.event, rig.stream); }},
      {"cuEventRecord", [&] { rig.eventRecord(reinterpret_cast<CUevent>(rig.event), reinterpret_cast<CUstream>(rig.stream)); }},
      {"cudaStreamWaitEvent(other stream's)", [&] { cudaStreamWaitEvent(rig.stream, rig.otherEvent, 0); }},
      {"launch <<<>>>", [&] { emptyKernel<<<1, 128, 0, rig.stream>>>(rig.args); }},
      {"launch <<<>>>, 8-byte argument", [&] { emptyKernelSmall<<<1, 128, 0, rig.stream>>>(argsOnDevice); }},
      {"cudaLaunchKernelEx", [&] { launchRuntime(rig, false); }},
      {"cudaLaunchKernelEx PDL", [&] { launchRuntime(rig, true); }},
      {"cuLaunchKernelEx PDL", [&] { launchDriver(rig); }},
      {"cudaLaunchKernelEx PDL + cudaEventRecord", [&] { launchRuntime(rig, true); cudaEventRecord(rig.event, rig.stream); }},
      {"enqueue as ours, without the record", [&] { enqueueLikeOurs(rig, false); }},
      {"enqueue as ours", [&] { enqueueLikeOurs(rig, true); }},
      {"enqueue through the driver", [&] { enqueueThroughDriver(rig); }},
      {"enqueue as ours (again)", [&] { enqueueLikeOurs(rig, true); }},
  };
  std::printf("# car_launch_cost_bench: %d calls per sample, median of %d samples\nstep,median_us\n", calls, samples);
  for (const Step& step : steps) {
    std::printf("%s,%.3f\n", step.name, timeStep(rig, calls, samples, step.body));
  }
  BENCH_OK(cudaGetLastError() == cudaSuccess, "the steps");
  ncclCommDestroy(rig.comm);
  return 0;
}
