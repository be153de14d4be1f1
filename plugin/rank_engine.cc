#include "rank_engine.h"

#include <chrono>
#include <thread>

#include "../kernels/geometry.h"
#include "device_guard.h"
#include "log.h"

namespace car {

cudaError_t RankEngine::create(const EngineOptions& options, std::unique_ptr<RankEngine>* out) {
  if (options.ranks < 2 || options.ranks > kMaxRanks || options.rank < 0 ||
      options.rank >= options.ranks) {
    return cudaErrorInvalidValue;
  }
  std::unique_ptr<BufferBlock> block;
  cudaError_t err = BufferBlock::allocate(options.device, options.config.maxBytes, &block);
  if (err != cudaSuccess) return err;

  DeviceGuard guard(options.device);
  void* abortWord = nullptr;
  err = cudaHostAlloc(&abortWord, sizeof(std::uint32_t), cudaHostAllocMapped | cudaHostAllocPortable);
  if (err != cudaSuccess) return err;
  *static_cast<volatile std::uint32_t*>(abortWord) = 0;

  cudaEvent_t lastLaunch = nullptr;
  err = cudaEventCreateWithFlags(&lastLaunch, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    cudaFreeHost(abortWord);
    return err;
  }
  out->reset(new RankEngine(options, std::move(block), static_cast<std::uint32_t*>(abortWord), lastLaunch));
  return cudaSuccess;
}

RankEngine::RankEngine(const EngineOptions& options, std::unique_ptr<BufferBlock> block,
                       std::uint32_t* abortWord, cudaEvent_t lastLaunch)
    : options_(options), block_(std::move(block)), abortWord_(abortWord), lastLaunch_(lastLaunch) {}

RankEngine::~RankEngine() {
  // Our kernels may still be running: the memory they use must outlive them.
  waitIdle();
  DeviceGuard guard(options_.device);
  cudaEventDestroy(lastLaunch_);
  cudaFreeHost(abortWord_);
}

void RankEngine::attachPeers(void* const* bases, bool fullNvlink, int computeCapability) {
  std::lock_guard<std::mutex> lock(launchMutex_);
  fullNvlink_ = fullNvlink;
  computeCapability_ = computeCapability;
  args_ = LaunchArgs{};
  args_.peers = peerTableFromBases(bases, options_.ranks, block_->layout());
  args_.selfSignal = static_cast<Signal*>(block_->base());
  args_.rank = options_.rank;
  args_.ranks = options_.ranks;
  args_.abortFlag = abortWord_;
  attached_ = true;
}

CallDecision RankEngine::plan(const AllReduceCall& call) const {
  CallFacts facts;
  facts.type = call.type;
  facts.opIsSum = call.opIsSum;
  facts.count = call.count;
  facts.sendAddress = reinterpret_cast<std::uintptr_t>(call.send);
  facts.recvAddress = reinterpret_cast<std::uintptr_t>(call.recv);
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
    stats_.countForwarded(decision.reason);
    return result;
  }
  std::lock_guard<std::mutex> lock(launchMutex_);
  result.error = enqueue(call, decision, &result.launched);
  if (!result.launched) {
    result.reason = ForwardReason::Failed;
    stats_.countForwarded(ForwardReason::Failed);
    return result;
  }
  result.algorithm = decision.algorithm;
  stats_.countTaken(decision.algorithm, decision.bytes);
  CAR_TRACE(options_.device, "rank {} all-reduce {} x {} ({} bytes) -> {}", options_.rank,
            call.count, elementTypeName(*call.type), decision.bytes, algorithmName(decision.algorithm));
  return result;
}

cudaError_t RankEngine::enqueue(const AllReduceCall& call, const CallDecision& decision, bool* launched) {
  *launched = false;
  DeviceGuard guard(options_.device);
  if (guard.error() != cudaSuccess) return guard.error();

  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing(call.stream, &capture);
  if (err != cudaSuccess) return err;
  const bool capturing = capture != cudaStreamCaptureStatusNone;

  // Calls of one communicator share staging and Signal: a call on another stream must not
  // start before the previous one ended. Inside capture the graph's own order applies.
  if (!capturing && haveLastLaunch_ && call.stream != lastStream_) {
    err = cudaStreamWaitEvent(call.stream, lastLaunch_, 0);
    if (err != cudaSuccess) return err;
  }

  LaunchArgs args = args_;
  args.output = call.recv;
  args.packs = static_cast<long long>(decision.bytes / kPackBytes);
  args.blocks = gridBlocks(args.packs, options_.config.maxBlocks);
  args.type = *call.type;
  args.algorithm = decision.algorithm;

  // A small eager call copies its input inside the kernel: one launch instead of two. In a
  // graph the launches cost nothing and the copy engine's copy is the faster one. The
  // kernel loads 16-byte packs, so an input that is not 16-byte aligned takes the copy engine.
  const bool inputAligned = reinterpret_cast<std::uintptr_t>(call.send) % kPackBytes == 0;
  if (!capturing && inputAligned && decision.bytes <= options_.config.copyInKernelBytes) {
    args.input = call.send;
  } else {
    void* staging = const_cast<void*>(args.peers.staging[options_.rank]);
    err = cudaMemcpyAsync(staging, call.send, decision.bytes, cudaMemcpyDeviceToDevice, call.stream);
    if (err != cudaSuccess) return err;
  }
  err = launchAllReduceKernel(args, call.stream);
  if (err != cudaSuccess) return err;
  *launched = true;

  if (!capturing) {
    err = cudaEventRecord(lastLaunch_, call.stream);
    if (err != cudaSuccess) return err;
    lastStream_ = call.stream;
    haveLastLaunch_ = true;
  }
  return cudaSuccess;
}

void RankEngine::raiseAbort() {
  __atomic_store_n(abortWord_, 1u, __ATOMIC_SEQ_CST);
}

bool RankEngine::aborted() const { return __atomic_load_n(abortWord_, __ATOMIC_SEQ_CST) != 0; }

cudaError_t RankEngine::waitIdle() {
  std::lock_guard<std::mutex> lock(launchMutex_);
  if (!haveLastLaunch_) return cudaSuccess;
  DeviceGuard guard(options_.device);
  return cudaEventSynchronize(lastLaunch_);
}

bool RankEngine::waitIdleWithin(double seconds) {
  std::lock_guard<std::mutex> lock(launchMutex_);
  if (!haveLastLaunch_) return true;
  DeviceGuard guard(options_.device);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (cudaEventQuery(lastLaunch_) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  cudaGetLastError();
  return true;
}

cudaError_t RankEngine::presetRound(std::uint32_t round) {
  DeviceGuard guard(options_.device);
  cudaError_t err = presetSignalRound(static_cast<Signal*>(block_->base()), round, nullptr);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  return err;
}

}  // namespace car
