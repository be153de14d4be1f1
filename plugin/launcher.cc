#include "launcher.h"

#include <chrono>
#include <thread>

#include "../kernels/geometry.h"
#include "abort_words.h"
#include "cuda_check.h"
#include "device_guard.h"
#include "log.h"
#include "stream_calls.h"

namespace car {
namespace {

// The kernel's view of every rank's block, given each block's base address as mapped in
// this process (index = rank). Pure arithmetic on the layout.
PeerTable peerTableFromBases(void* const* bases, int ranks, const BlockLayout& layout) {
  PeerTable table{};
  for (int r = 0; r < ranks; ++r) {
    char* base = static_cast<char*>(bases[r]);
    table.signals[r] = reinterpret_cast<Signal*>(base);
    table.tmp[r] = base + layout.tmpOffset;
    table.staging[r] = base + layout.stagingOffset;
    table.areas[r] = base + layout.areasOffset;
  }
  return table;
}

}  // namespace

cudaError_t Launcher::create(const EngineOptions& options, std::unique_ptr<Launcher>* out) {
  if (!takesWorldSize(options.ranks) || options.rank < 0 || options.rank >= options.ranks) {
    return cudaErrorInvalidValue;
  }
  KernelTable kernels;
  {
    DeviceGuard loading(options.device);
    CAR_CUDA_RETURN_IF_FAILED(options.device, loading.error());
    CAR_CUDA_RETURN_IF_FAILED(options.device, loadKernels(options.ranks, &kernels));
  }
  DeviceGuard guard(options.device);
  int major = 0;
  CAR_CUDA_RETURN_IF_FAILED(options.device,
                            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, options.device));
  std::uint32_t* abortWord = nullptr;
  CAR_CUDA_RETURN_IF_FAILED(options.device, takeAbortWord(&abortWord));

  cudaEvent_t lastLaunch = nullptr;
  const cudaError_t err = cudaEventCreateWithFlags(&lastLaunch, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    noteCudaFailure(err, LogLevel::Info, "cudaEventCreateWithFlags", __FILE__, __LINE__, options.device);
    keepAbortWord(abortWord);
    return err;
  }
  const bool pdl = options.config.pdl && major >= 9;
  out->reset(new Launcher(options, abortWord, lastLaunch, pdl, kernels));
  return cudaSuccess;
}

Launcher::Launcher(const EngineOptions& options, std::uint32_t* abortWord, cudaEvent_t lastLaunch, bool pdl,
                   const KernelTable& kernels)
    : options_(options),
      abortWord_(abortWord),
      lastLaunch_(lastLaunch),
      pdl_(pdl),
      afterLaunch_(options.config.testLaunchFailure ? cudaErrorLaunchFailure : cudaSuccess),
      kernels_(kernels) {}

Launcher::~Launcher() {
  // Our kernels may still be running: the memory they use must outlive them.
  waitIdle();
  DeviceGuard guard(options_.device);
  CAR_CUDA_RELEASE(options_.device, cudaEventDestroy(lastLaunch_));
  if (everCaptured_) {
    // A replay of a captured call may still read it: freed, which waits for the device.
    CAR_CUDA_RELEASE(options_.device, cudaFreeHost(abortWord_));
  } else {
    keepAbortWord(abortWord_);  // no kernel of ours reads it any more
  }
}

void Launcher::attachPeers(void* const* bases, const BlockLayout& layout) {
  args_ = LaunchArgs{};
  args_.peers = peerTableFromBases(bases, options_.ranks, layout);
  args_.selfSignal = args_.peers.signals[options_.rank];
  args_.pushState = reinterpret_cast<PushState*>(static_cast<char*>(bases[options_.rank]) + layout.pushStateOffset);
  args_.areaBytes = layout.areaBytes;
  args_.rank = options_.rank;
  args_.ranks = options_.ranks;
  args_.pdl = pdl_;
  args_.abortFlag = abortWord_;
  attached_ = true;
}

LaunchArgs Launcher::launchArgs(const CollectiveCall& call, const CallPlan& plan, Staging staging) const {
  LaunchArgs args = args_;
  args.output = call.recv;
  // Null: our copy has put it into staging already.
  args.input = staging == Staging::CopyEngine ? nullptr : call.send;
  args.bytes = static_cast<long long>(plan.bytes);
  args.packs = plan.packs;
  args.blocks = plan.blocks;
  args.threads = plan.threads;
  args.type = *call.type;
  args.op = call.op.value_or(ReduceOp::Sum);  // an all-gather has none and reads none
  args.algorithm = plan.algorithm;
  // The kernel follows our copy, not another kernel: nothing for PDL to overlap.
  if (staging == Staging::CopyEngine) args.pdl = false;
  return args;
}

cudaError_t Launcher::launch(const CollectiveCall& call, const CallPlan& plan, bool* launched) {
  *launched = false;
  DeviceGuard guard(options_.device);
  if (guard.error() != cudaSuccess) {
    return noteCudaFailure(guard.error(), LogLevel::Info, "cudaSetDevice", __FILE__, __LINE__, options_.device);
  }
  bool capturing = false;
  CAR_CUDA_RETURN_IF_FAILED(options_.device, streamIsCapturing(call.stream, &capturing));

  // Calls share areas, staging and Signal: each starts after the previous one ended, on
  // whatever stream that was (docs/design.md, "The launch path"). On the stream of
  // the previous launch, stream order already says so. Inside capture the graph's own order
  // applies, and an event of the eager world cannot be waited on.
  unsigned long long streamId = 0;
  const bool streamIdKnown = !capturing && streamIdOf(call.stream, &streamId) == cudaSuccess;
  if (!streamIdKnown) cudaGetLastError();
  const bool sameStream = streamIdKnown && lastStreamIdKnown_ && streamId == lastStreamId_;
  if (!capturing && haveLastLaunch_ && !sameStream) {
    CAR_CUDA_RETURN_IF_FAILED(options_.device, cudaStreamWaitEvent(call.stream, lastLaunch_, 0));
  }
  const bool inputPackAligned = reinterpret_cast<std::uintptr_t>(call.send) % kPackBytes == 0;
  const Staging staging = stagingFor(plan, inputPackAligned, capturing, options_.config);
  const LaunchArgs args = launchArgs(call, plan, staging);
  if (staging == Staging::CopyEngine) {
    void* ownStaging = const_cast<void*>(args.peers.staging[options_.rank]);
    CAR_CUDA_RETURN_IF_FAILED(options_.device, cudaMemcpyAsync(ownStaging, call.send, plan.bytes,
                                                               cudaMemcpyDeviceToDevice, call.stream));
  }
  // The caller's event failing to record (destroyed, of another device) is the caller's
  // problem, said once: the call stays ours, as it is on every other rank.
  if (call.launchCompletion != nullptr && cudaEventRecord(call.launchCompletion, call.stream) != cudaSuccess) {
    const cudaError_t error = cudaGetLastError();
    if (!completionEventWarned_) {
      completionEventWarned_ = true;
      CAR_WARN(options_.device, "rank {}: ncclAllReduceConfig: its launchCompletionEvent cannot be recorded ({}); "
               "the all-reduce runs without it (said once)", options_.rank, cudaGetErrorString(error));
    }
  }
  // An error the application left in CUDA's last-error slot is not ours to report, and must
  // not make our launch look failed (a launched call must never also be forwarded).
  cudaGetLastError();
  // Inside capture through the runtime: should the driver refuse, its failed launch could
  // end the caller's capture, and a captured launch costs nothing on replay anyway.
  bool throughDriver = false;
  CAR_CUDA_RETURN_IF_FAILED(options_.device,
                            launchCollectiveKernel(args, call.stream, capturing ? nullptr : &kernels_, &throughDriver));
  *launched = true;
  driverLaunches_ += throughDriver ? 1 : 0;

  everCaptured_ = everCaptured_ || capturing;
  if (!capturing) {
    // Forget the stream first: should the record fail, the next call waits (on the old event).
    lastStreamIdKnown_ = false;
    CAR_CUDA_RETURN_IF_FAILED(options_.device, recordEvent(lastLaunch_, call.stream));
    haveLastLaunch_ = true;
    lastStreamId_ = streamId;
    lastStreamIdKnown_ = streamIdKnown;
  }
  return afterLaunch_;
}

cudaError_t Launcher::waitIdle() {
  if (!haveLastLaunch_) return cudaSuccess;
  DeviceGuard guard(options_.device);
  CAR_CUDA_RETURN_IF_FAILED(options_.device, cudaEventSynchronize(lastLaunch_));
  return cudaSuccess;
}

bool Launcher::waitIdleWithin(double seconds) {
  if (!haveLastLaunch_) return true;
  DeviceGuard guard(options_.device);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (cudaEventQuery(lastLaunch_) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      cudaGetLastError();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  cudaGetLastError();
  return true;
}

cudaError_t Launcher::presetRound(std::uint32_t round) {
  Signal* signal = args_.selfSignal;
  if (signal == nullptr) return cudaErrorInvalidValue;
  DeviceGuard guard(options_.device);
  cudaError_t err = presetSignalRound(signal, round, nullptr);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  return err;
}

}  // namespace car
