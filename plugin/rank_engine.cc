#include "rank_engine.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "../kernels/geometry.h"
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

cudaError_t RankEngine::create(const EngineOptions& options, CallStats* counters, std::unique_ptr<RankEngine>* out) {
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
  void* abortWord = nullptr;
  CAR_CUDA_RETURN_IF_FAILED(options.device,
                            cudaHostAlloc(&abortWord, sizeof(std::uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
  *static_cast<volatile std::uint32_t*>(abortWord) = 0;

  cudaEvent_t lastLaunch = nullptr;
  const cudaError_t err = cudaEventCreateWithFlags(&lastLaunch, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    noteCudaFailure(err, LogLevel::Info, "cudaEventCreateWithFlags", __FILE__, __LINE__, options.device);
    CAR_CUDA_RELEASE(options.device, cudaFreeHost(abortWord));
    return err;
  }
  const bool pdl = options.config.pdl && major >= 9;
  out->reset(new RankEngine(options, counters, static_cast<std::uint32_t*>(abortWord), lastLaunch, pdl, kernels));
  return cudaSuccess;
}

RankEngine::RankEngine(const EngineOptions& options, CallStats* counters, std::uint32_t* abortWord,
                       cudaEvent_t lastLaunch, bool pdl, const KernelTable& kernels)
    : options_(options),
      stats_(counters),
      abortWord_(abortWord),
      lastLaunch_(lastLaunch),
      pdl_(pdl),
      kernels_(kernels) {}

RankEngine::~RankEngine() {
  // Our kernels may still be running: the memory they use must outlive them.
  waitIdle();
  DeviceGuard guard(options_.device);
  CAR_CUDA_RELEASE(options_.device, cudaEventDestroy(lastLaunch_));
  CAR_CUDA_RELEASE(options_.device, cudaFreeHost(abortWord_));
}

void RankEngine::attachPeers(void* const* bases, const BlockLayout& layout, bool fullNvlink, int computeCapability) {
  std::lock_guard<std::mutex> lock(launchMutex_);
  fullNvlink_ = fullNvlink;
  computeCapability_ = computeCapability;
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

CallDecision RankEngine::plan(const AllReduceCall& call) const {
  CallFacts facts;
  facts.type = call.type;
  facts.op = call.op;
  facts.count = call.count;
  facts.symmetricBuffers = call.symmetricBuffers;
  CallDecision decision = decideCall(CommunicatorFacts{options_.ranks, fullNvlink_, computeCapability_}, facts,
                                     options_.config);
  if (decision.ours && !attached_) {
    decision.ours = false;
    decision.reason = ForwardReason::NotReady;
  }
  return decision;
}

SubmitResult RankEngine::submit(const AllReduceCall& call) {
  SubmitResult result;
  const CallDecision decision = plan(call);
  if (!decision.ours) {
    result.reason = decision.reason;
    stats_->countForwarded(decision.reason);
    return result;
  }
  std::lock_guard<std::mutex> lock(launchMutex_);
  result.error = enqueue(call, decision, &result.launched);
  if (!result.launched) {
    result.reason = ForwardReason::Failed;
    stats_->countForwarded(ForwardReason::Failed);
    return result;
  }
  result.algorithm = decision.algorithm;
  stats_->countTaken(decision.algorithm, decision.bytes);
  CAR_TRACE(options_.device, "{}", logText(formatTakenCall, options_.rank, call.count, elementTypeName(*call.type),
                                           reduceOpName(*call.op), decision.bytes, algorithmName(decision.algorithm)));
  return result;
}

cudaError_t RankEngine::prepareLaunch(const AllReduceCall& call, const CallDecision& decision, bool capturing,
                                      LaunchArgs* args) {
  *args = args_;
  args->output = call.recv;
  args->bytes = static_cast<long long>(decision.bytes);
  args->packs = packsOf(args->bytes);
  args->type = *call.type;
  args->op = *call.op;
  args->algorithm = decision.algorithm;
  if (isPush(decision.algorithm)) {
    // The kernel reads the caller's input itself, whatever its alignment: no staging copy.
    args->input = call.send;
    const bool twoShot = decision.algorithm == Algorithm::TwoShotPush;
    const long long work = twoShot ? twoShotShardPacks(args->packs, options_.ranks) : args->packs;
    const int maxBlocks = std::min(options_.config.maxBlocks, pushBlockLimit(wirePacksPerPack(*call.type)));
    args->blocks = pushGridBlocks(work, twoShot, maxBlocks);
    args->threads = pushBlockThreads(work, twoShot, args->blocks);
    return cudaSuccess;
  }
  args->blocks = gridBlocks(args->packs, std::min(options_.config.maxBlocks, kMaxBlocks));
  args->threads = kThreadsPerBlock;
  // A small eager call copies its input inside the kernel: one launch instead of two. In a
  // graph the launches cost nothing and the copy engine's copy is the faster one. The
  // kernel copies whole 16-byte packs, so an input that is not 16-byte aligned, or not a
  // whole number of packs (it must not read past the caller's buffer), takes the copy engine.
  const bool inputAligned = reinterpret_cast<std::uintptr_t>(call.send) % kPackBytes == 0;
  const bool wholePacks = decision.bytes % kPackBytes == 0;
  if (!capturing && inputAligned && wholePacks && decision.bytes <= options_.config.copyInKernelBytes) {
    args->input = call.send;
    return cudaSuccess;
  }
  args->input = nullptr;
  // The kernel follows our copy, not another kernel: nothing for PDL to overlap.
  args->pdl = false;
  void* staging = const_cast<void*>(args->peers.staging[options_.rank]);
  CAR_CUDA_RETURN_IF_FAILED(options_.device, cudaMemcpyAsync(staging, call.send, decision.bytes,
                                                             cudaMemcpyDeviceToDevice, call.stream));
  return cudaSuccess;
}

cudaError_t RankEngine::enqueue(const AllReduceCall& call, const CallDecision& decision, bool* launched) {
  *launched = false;
  DeviceGuard guard(options_.device);
  if (guard.error() != cudaSuccess) {
    return noteCudaFailure(guard.error(), LogLevel::Info, "cudaSetDevice", __FILE__, __LINE__, options_.device);
  }
  bool capturing = false;
  CAR_CUDA_RETURN_IF_FAILED(options_.device, streamIsCapturing(call.stream, &capturing));

  // Calls of one engine share areas, staging and Signal: each starts after the previous one
  // ended, on whatever stream that was (docs/design.md, "The launch path"). On the stream of
  // the previous launch, stream order already says so. Inside capture the graph's own order
  // applies, and an event of the eager world cannot be waited on.
  unsigned long long streamId = 0;
  const bool streamIdKnown = !capturing && streamIdOf(call.stream, &streamId) == cudaSuccess;
  if (!streamIdKnown) cudaGetLastError();
  const bool sameStream = streamIdKnown && lastStreamIdKnown_ && streamId == lastStreamId_;
  if (!capturing && haveLastLaunch_ && !sameStream) {
    CAR_CUDA_RETURN_IF_FAILED(options_.device, cudaStreamWaitEvent(call.stream, lastLaunch_, 0));
  }
  LaunchArgs args;
  const cudaError_t prepared = prepareLaunch(call, decision, capturing, &args);
  if (prepared != cudaSuccess) return prepared;
  // An error the application left in CUDA's last-error slot is not ours to report, and must
  // not make our launch look failed (a launched call must never also be forwarded).
  cudaGetLastError();
  // Inside capture through the runtime: should the driver refuse, its failed launch could
  // end the caller's capture, and a captured launch costs nothing on replay anyway.
  bool throughDriver = false;
  CAR_CUDA_RETURN_IF_FAILED(options_.device,
                            launchAllReduceKernel(args, call.stream, capturing ? nullptr : &kernels_, &throughDriver));
  *launched = true;
  driverLaunches_ += throughDriver ? 1 : 0;

  if (!capturing) {
    // Forget the stream first: should the record fail, the next call waits (on the old event).
    lastStreamIdKnown_ = false;
    CAR_CUDA_RETURN_IF_FAILED(options_.device, recordEvent(lastLaunch_, call.stream));
    haveLastLaunch_ = true;
    lastStreamId_ = streamId;
    lastStreamIdKnown_ = streamIdKnown;
  }
  return cudaSuccess;
}

void RankEngine::raiseAbort() {
  __atomic_store_n(abortWord_, 1u, __ATOMIC_SEQ_CST);
}

cudaError_t RankEngine::waitIdle() {
  std::lock_guard<std::mutex> lock(launchMutex_);
  if (!haveLastLaunch_) return cudaSuccess;
  DeviceGuard guard(options_.device);
  CAR_CUDA_RETURN_IF_FAILED(options_.device, cudaEventSynchronize(lastLaunch_));
  return cudaSuccess;
}

bool RankEngine::waitIdleWithin(double seconds) {
  std::lock_guard<std::mutex> lock(launchMutex_);
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

std::uint64_t RankEngine::driverLaunches() {
  std::lock_guard<std::mutex> lock(launchMutex_);
  return driverLaunches_;
}

cudaError_t RankEngine::presetRound(std::uint32_t round) {
  Signal* signal = nullptr;
  {
    std::lock_guard<std::mutex> lock(launchMutex_);
    signal = args_.selfSignal;
  }
  if (signal == nullptr) return cudaErrorInvalidValue;
  DeviceGuard guard(options_.device);
  cudaError_t err = presetSignalRound(signal, round, nullptr);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  return err;
}

}  // namespace car
