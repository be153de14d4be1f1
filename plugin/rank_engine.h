// The host engine of one rank of one communicator: the choice of kernel and the launch path:
// a push kernel alone on the caller's stream; a pull kernel after a staging copy, or alone for
// small eager calls (it then copies inside). The buffer blocks it launches on, its own and the
// peers', are lent to it by their owner (shim/ipc/buffer_block.h) at attachPeers().
//
// The launch path allocates nothing, synchronises nothing and talks to no peer, so it is
// legal inside CUDA graph capture: every address the kernel touches was fixed by
// attachPeers().
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "../kernels/all_reduce.h"
#include "config.h"
#include "policy.h"
#include "stats.h"

namespace car {

struct EngineOptions {
  int device = 0;
  int rank = 0;
  int ranks = 0;
  Config config;
};

// One call as this rank makes it: the facts every rank shares (all the policy sees), and this
// rank's buffers and stream. shim/exports/nccl_types.h makes it from NCCL's arguments.
struct CollectiveCall : CallFacts {
  const void* send = nullptr;  // any alignment
  void* recv = nullptr;        // any alignment
  cudaStream_t stream = nullptr;
  // ncclAllReduceConfig's launchCompletionEvent, or null: recorded on the stream just before
  // our kernel is launched (as NCCL records it where CUDA has no launch-completion events).
  cudaEvent_t launchCompletion = nullptr;
};

struct SubmitResult {
  bool launched = false;  // our kernel is on the stream: the call must not be forwarded
  Algorithm algorithm = Algorithm::OneStage;  // when launched
  ForwardReason reason = ForwardReason::NotReady;  // when not launched
  // A CUDA call on our path failed. With launched == false nothing that matters is on the
  // stream (at most the staging copy, which only peers of a later call read); with
  // launched == true the kernel is queued but ordering for later calls could not be recorded.
  cudaError_t error = cudaSuccess;
};

class RankEngine {
 public:
  // Loads this world size's kernels and allocates the abort word and the ordering event.
  // Counts every call into *counters, which must outlive the engine. Fails with the CUDA
  // error, or with cudaErrorInvalidValue for a world size we do not take (kernels/hard_limits.h)
  // or a rank outside it.
  static cudaError_t create(const EngineOptions& options, CallStats* counters, std::unique_ptr<RankEngine>* out);
  ~RankEngine();
  RankEngine(const RankEngine&) = delete;
  RankEngine& operator=(const RankEngine&) = delete;

  int device() const { return options_.device; }
  int rank() const { return options_.rank; }
  int ranks() const { return options_.ranks; }
  const Config& config() const { return options_.config; }
  CallStats& stats() { return *stats_; }

  // bases[r]: rank r's block as mapped in this process (our own at rank()), every one laid
  // out by `layout`; they must stay mapped until the engine is gone. fullNvlink: whether
  // every pair of ranks is NVLink-connected; computeCapability: of every rank's GPU, 0 if
  // they differ (both feed the policy, identically on every rank).
  void attachPeers(void* const* bases, const BlockLayout& layout, bool fullNvlink, int computeCapability);
  bool attached() const { return attached_; }

  // The plan only (policy.h): no CUDA call. An unattached engine forwards with NotReady.
  CallPlan plan(const CallFacts& call) const;

  // Plans, and when the call is ours enqueues it on call.stream (after the previous call of
  // this engine, whatever stream that was on). When !launched the caller must forward the
  // call. Counts the outcome.
  SubmitResult submit(const CollectiveCall& call);

  // Makes every kernel of this rank stop spinning and return (used by ncclCommAbort);
  // their outputs are then undefined. Irreversible.
  void raiseAbort();

  // Blocks until everything this engine enqueued outside graph capture has finished.
  cudaError_t waitIdle();
  // Whether a call of this engine was ever captured into a CUDA graph: a replay of it may
  // still run after waitIdle, so what it uses (the block, the abort word) must not be handed
  // to another communicator at release.
  bool everCaptured();
  // The same, giving up after `seconds`: returns false if our last launch is still running
  // (after an abort, a kernel queued behind a hung one on the caller's stream).
  bool waitIdleWithin(double seconds);

  // Test hook, once attached: start every barrier count at `round` (all ranks must use the
  // same value).
  cudaError_t presetRound(std::uint32_t round);

  // Test hook: how many of this engine's launches went through the driver.
  std::uint64_t driverLaunches();

 private:
  RankEngine(const EngineOptions& options, CallStats* counters, std::uint32_t* abortWord, cudaEvent_t lastLaunch,
             bool pdl, const KernelTable& kernels);
  // Sets *launched once the kernel is on the stream, whatever fails after that.
  cudaError_t enqueue(const CollectiveCall& call, const CallPlan& plan, bool* launched);
  // The kernel's one argument: the plan on this engine's fixed addresses.
  LaunchArgs launchArgs(const CollectiveCall& call, const CallPlan& plan, Staging staging) const;

  EngineOptions options_;
  CallStats* stats_;          // the communicator's counters (shim/lifecycle/comm_state.h)
  std::uint32_t* abortWord_;  // pinned, mapped host memory the kernels poll
  // Recorded after every eager launch, and waited on before the next one unless that comes on
  // the very same stream: calls of one engine share areas, staging and Signal, so each must
  // start after the previous one ended. Streams are told apart by CUDA's unique stream id,
  // never by handle (cudaStreamPerThread of two threads is one handle for two streams;
  // handles are reused after cudaStreamDestroy; ids are not).
  cudaEvent_t lastLaunch_;
  bool haveLastLaunch_ = false;
  bool everCaptured_ = false;
  unsigned long long lastStreamId_ = 0;
  bool lastStreamIdKnown_ = false;
  bool pdl_ = false;          // NCCL_CAR_PDL and this GPU is sm_90 or newer
  // What a call reports once its kernel is queued and ordered: cudaSuccess, or the test
  // fault's error (Config::testLaunchFailure), fixed at creation so the check costs nothing.
  cudaError_t afterLaunch_ = cudaSuccess;
  KernelTable kernels_;       // this world size's kernels in the device's context at creation
  std::uint64_t driverLaunches_ = 0;  // eager launches that went through the driver (tests)
  std::atomic<bool> completionEventWarned_{false};
  bool attached_ = false;
  bool fullNvlink_ = false;
  int computeCapability_ = 0;
  LaunchArgs args_{};
  std::mutex launchMutex_;    // one call at a time: they share staging and Signal
};

}  // namespace car
