// What each CUDA (and NCCL) call on the eager path of one of our all-reduces costs the host,
// one by one, on this machine: the numbers behind the host-time budget (the aim: at most half
// of NCCL's host time per call). No communicator of ours: an empty kernel whose one argument
// has the size of our LaunchArgs stands in for ours, launched by the library's own launch
// functions. The cu* rows are the library's driver calls (kernels/driver_calls.h,
// plugin/stream_calls.h).
//
//   car_launch_cost_bench [--calls N] [--samples N]
//
// Output: one line per step, "name,median_us" (median over samples of the mean per call).
// Between samples the stream is drained, so launches never wait for a full queue. The steps
// marked "busy" are timed behind a kernel that keeps the stream running the whole sample, as
// our eager calls are, each waiting on its peers while the host enqueues the next.
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

#include "call_floor.h"
#include "dispatch.cuh"
#include "driver_calls.h"
#include "stream_calls.h"

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

// Keeps the stream busy for `nanoseconds`: the launches timed behind it queue up, as in a run.
__global__ void spinKernel(unsigned long long nanoseconds) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (unsigned long long now = start; now - start < nanoseconds;) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  }
}

struct Rig {
  cudaStream_t stream = nullptr;
  cudaStream_t other = nullptr;
  cudaEvent_t event = nullptr;
  cudaEvent_t otherEvent = nullptr;
  ncclComm_t comm = nullptr;
  car::LaunchArgs args{};  // 1 block of 128 threads, PDL
  void* function = nullptr;  // emptyKernel for the driver (car::driverFunctionOf)
};

// The library's own launches (kernels/dispatch.cuh, kernels/driver_calls.h) of the empty kernel.
cudaError_t launchRuntime(Rig& rig, bool pdl) {
  car::LaunchArgs args = rig.args;
  args.pdl = pdl;
  return car::launchGrid(&emptyKernel, car::launchShapeOf(args), args, rig.stream);
}

bool launchDriver(Rig& rig) { return car::launchThroughDriver(rig.function, car::launchShapeOf(rig.args), rig.args, rig.stream); }

bool launchDriverWithoutPdl(Rig& rig) {
  car::LaunchArgs args = rig.args;
  args.pdl = false;
  return car::launchThroughDriver(rig.function, car::launchShapeOf(args), args, rig.stream);
}

// The steps of Launcher::launch on the eager path, in its order.
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

// The same steps as the library makes them now: the stream queries, the launch and the
// record through the driver.
void enqueueThroughDriver(Rig& rig) {
  int device = -1;
  cudaGetDevice(&device);
  bool capturing = false;
  car::streamIsCapturing(rig.stream, &capturing);
  unsigned long long id = 0;
  car::streamIdOf(rig.stream, &id);
  cudaGetLastError();
  launchDriver(rig);
  car::recordEvent(rig.event, rig.stream);
}

double medianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// busy: the stream runs a spin kernel, long enough to outlast the sample, before the calls.
double timeStep(Rig& rig, int calls, int samples, bool busy, const std::function<void()>& step) {
  for (int i = 0; i < calls; ++i) step();  // warm-up
  BENCH_OK(cudaDeviceSynchronize() == cudaSuccess, "warm-up");
  std::vector<double> perCall;
  for (int s = 0; s < samples; ++s) {
    if (busy) spinKernel<<<1, 1, 0, rig.stream>>>(calls * 50000ull);  // 50 us a call
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) step();
    perCall.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
                      calls);
    BENCH_OK(cudaDeviceSynchronize() == cudaSuccess, "a sample");
  }
  return medianOf(perCall);
}

// As car_nccl_bench times a call: each timed step alone, right after an untimed launch of
// another kernel (the bench writes the call's input first), summed over the calls.
double timeOneByOne(Rig& rig, int calls, int samples, const std::function<void()>& before,
                    const std::function<void()>& step) {
  for (int i = 0; i < calls; ++i) {
    before();
    step();
  }
  BENCH_OK(cudaDeviceSynchronize() == cudaSuccess, "warm-up");
  std::vector<double> perCall;
  for (int s = 0; s < samples; ++s) {
    spinKernel<<<1, 1, 0, rig.stream>>>(calls * 50000ull);
    double micros = 0;
    for (int i = 0; i < calls; ++i) {
      before();
      const auto start = std::chrono::steady_clock::now();
      step();
      micros += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    }
    perCall.push_back(micros / calls);
    BENCH_OK(cudaDeviceSynchronize() == cudaSuccess, "a sample");
  }
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
  // With two GPUs, also a communicator of two ranks, as the hook queries in a run.
  ncclComm_t pair[2] = {nullptr, nullptr};
  int both[2] = {0, 1};
  if (devices >= 2) BENCH_OK(ncclCommInitAll(pair, 2, both) == ncclSuccess, "ncclCommInitAll (2 GPUs)");
  BENCH_OK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
  rig.args.ranks = 2;
  rig.args.blocks = 1;
  rig.args.threads = 128;
  rig.args.pdl = true;
  rig.function = car::driverFunctionOf(reinterpret_cast<const void*>(&emptyKernel));
  BENCH_OK(rig.function != nullptr, "car::driverFunctionOf");
  const car::LaunchArgs* argsOnDevice = nullptr;
  const bench::CallFloor floor;
  BENCH_OK(floor.ok(), "the CUDA floor's driver entry points");

  struct Step {
    const char* name;
    std::function<void()> body;
    bool busy = false;
  };
  const std::vector<Step> steps = {
      {"cudaGetDevice", [&] { int d; cudaGetDevice(&d); }},
      {"cudaSetDevice(same)", [&] { cudaSetDevice(0); }},
      {"cudaStreamIsCapturing", [&] { cudaStreamCaptureStatus s; cudaStreamIsCapturing(rig.stream, &s); }},
      {"cuStreamIsCapturing", [&] { bool c; car::streamIsCapturing(rig.stream, &c); }},
      {"cudaStreamGetId", [&] { unsigned long long id; cudaStreamGetId(rig.stream, &id); }},
      {"cuStreamGetId", [&] { unsigned long long id; car::streamIdOf(rig.stream, &id); }},
      {"cudaGetLastError", [&] { cudaGetLastError(); }},
      {"ncclCommGetAsyncError", [&] { ncclResult_t r; ncclCommGetAsyncError(rig.comm, &r); }},
      {"ncclCommGetAsyncError, 2 ranks (2 GPUs only)", [&] {
         ncclResult_t r;
         if (pair[0] != nullptr) ncclCommGetAsyncError(pair[0], &r);
       }},
      {"cudaEventRecord", [&] { cudaEventRecord(rig.event, rig.stream); }},
      {"cuEventRecord", [&] { car::recordEvent(rig.event, rig.stream); }},
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
      {"busy: cudaLaunchKernelEx", [&] { launchRuntime(rig, false); }, true},
      {"busy: cudaLaunchKernelEx PDL", [&] { launchRuntime(rig, true); }, true},
      {"busy: cuLaunchKernelEx PDL", [&] { launchDriver(rig); }, true},
      {"busy: cuLaunchKernelEx", [&] { launchDriverWithoutPdl(rig); }, true},
      {"busy: enqueue through the driver", [&] { enqueueThroughDriver(rig); }, true},
      // The floor a call of ours is held to (tests/bench/run-host-path-bench.sh): the launch
      // with PDL and the ordering event's record, as the library makes them, on a busy stream.
      {"floor: busy: cuLaunchKernelEx PDL + cuEventRecord", [&] { floor.enqueue(rig.stream); }, true},
  };
  std::printf("# car_launch_cost_bench: %d calls per sample, median of %d samples\nstep,median_us\n", calls, samples);
  for (const Step& step : steps) {
    std::printf("%s,%.3f\n", step.name, timeStep(rig, calls, samples, step.busy, step.body));
  }
  // The floor and a staging copy as a call of car_nccl_bench's isolated mode meets them.
  const auto otherLaunch = [&] { emptyKernelSmall<<<1, 128, 0, rig.stream>>>(argsOnDevice); };
  std::printf("one by one: busy: cuLaunchKernelEx PDL + cuEventRecord,%.3f\n",
              timeOneByOne(rig, calls, samples, otherLaunch, [&] { floor.enqueue(rig.stream); }));
  constexpr std::size_t kCopyBytes = 1 << 20;
  void* copyFrom = nullptr;
  void* copyTo = nullptr;
  BENCH_OK(cudaMalloc(&copyFrom, kCopyBytes) == cudaSuccess && cudaMalloc(&copyTo, kCopyBytes) == cudaSuccess,
           "cudaMalloc");
  std::printf("one by one: busy: cudaMemcpyAsync 1 MiB device to device,%.3f\n",
              timeOneByOne(rig, calls, samples, otherLaunch, [&] {
                cudaMemcpyAsync(copyTo, copyFrom, kCopyBytes, cudaMemcpyDeviceToDevice, rig.stream);
              }));
  BENCH_OK(cudaFree(copyFrom) == cudaSuccess && cudaFree(copyTo) == cudaSuccess, "cudaFree");
  BENCH_OK(cudaGetLastError() == cudaSuccess, "the steps");
  ncclCommDestroy(rig.comm);
  for (ncclComm_t comm : pair) {
    if (comm != nullptr) ncclCommDestroy(comm);
  }
  return 0;
}
