// The launch path of one rank of one communicator: a planned call (policy.h) put on the
// caller's stream, a push kernel alone, a pull kernel after a staging copy or alone for small
// eager calls (it then copies inside). The buffer blocks it launches on, its own and the
// peers', are lent to it by their owner (shim/ipc/buffer_block.h) at attachPeers().
//
// It holds no lock and decides nothing: its owner (the communicator, shim/lifecycle/
// communicator.h) plans each call and launches one at a time under its own lock, since calls
// share staging, areas and Signal. The launch allocates nothing, synchronises nothing and
// talks to no peer, so it is legal inside CUDA graph capture: every address the kernel
// touches was fixed by attachPeers().
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "../kernels/all_reduce.h"
#include "config.h"
#include "policy.h"

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

class Launcher {
 public:
  // Loads this world size's kernels and allocates the abort word and the ordering event.
  // Fails with the CUDA error, or with cudaErrorInvalidValue for a world size we do not take
  // (kernels/hard_limits.h) or a rank outside it.
  static cudaError_t create(const EngineOptions& options, std::unique_ptr<Launcher>* out);
  // Waits for its last launch (its kernels use the memory that goes with it).
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  int device() const { return options_.device; }
  int rank() const { return options_.rank; }
  int ranks() const { return options_.ranks; }
  const Config& config() const { return options_.config; }

  // bases[r]: rank r's block as mapped in this process (our own at rank()), every one laid
  // out by `layout`; they must stay mapped until the launcher is gone.
  void attachPeers(void* const* bases, const BlockLayout& layout);
  bool attached() const { return attached_; }

  // Enqueues a call that planCall made ours on call.stream, after the previous launch of this
  // launcher, whatever stream that was on. *launched is set once the kernel is on the stream,
  // whatever fails after that: such a call must never also be forwarded. Requires attached().
  cudaError_t launch(const CollectiveCall& call, const CallPlan& plan, bool* launched);

  // The word its kernels poll: raising it makes every kernel of this rank stop spinning and
  // return (ncclCommAbort); their outputs are then undefined. Irreversible. Lives as long as
  // the launcher.
  void raiseAbort() { __atomic_store_n(abortWord_, 1u, __ATOMIC_SEQ_CST); }

  // Blocks until everything launched outside graph capture has finished.
  cudaError_t waitIdle();
  // The same, giving up after `seconds`: false if the last launch is still running (after an
  // abort, a kernel queued behind a hung one on the caller's stream).
  bool waitIdleWithin(double seconds);
  // Whether a call was ever captured into a CUDA graph: a replay of it may still run after
  // waitIdle, so what it uses (the block, the abort word) must not go to another communicator.
  bool everCaptured() const { return everCaptured_; }

  // Test hook, once attached: start every barrier count at `round` (all ranks must use the
  // same value).
  cudaError_t presetRound(std::uint32_t round);
  // Test hook: how many launches went through the driver.
  std::uint64_t driverLaunches() const { return driverLaunches_; }

 private:
  Launcher(const EngineOptions& options, std::uint32_t* abortWord, cudaEvent_t lastLaunch, bool pdl,
           const KernelTable& kernels);
  // The kernel's one argument: the plan on this launcher's fixed addresses.
  LaunchArgs launchArgs(const CollectiveCall& call, const CallPlan& plan, Staging staging) const;

  EngineOptions options_;
  std::uint32_t* abortWord_;  // pinned, mapped host memory the kernels poll
  // Recorded after every eager launch, and waited on before the next one unless that comes on
  // the very same stream: calls share areas, staging and Signal, so each must start after the
  // previous one ended. Streams are told apart by CUDA's unique stream id, never by handle
  // (cudaStreamPerThread of two threads is one handle for two streams; handles are reused
  // after cudaStreamDestroy; ids are not).
  cudaEvent_t lastLaunch_;
  bool haveLastLaunch_ = false;
  bool everCaptured_ = false;
  unsigned long long lastStreamId_ = 0;
  bool lastStreamIdKnown_ = false;
  bool pdl_ = false;  // NCCL_CAR_PDL and this GPU is sm_90 or newer
  // What a call reports once its kernel is queued and ordered: cudaSuccess, or the test
  // fault's error (Config::testLaunchFailure), fixed at creation so the check costs nothing.
  cudaError_t afterLaunch_ = cudaSuccess;
  KernelTable kernels_;  // this world size's kernels in the device's context at creation
  std::uint64_t driverLaunches_ = 0;
  bool completionEventWarned_ = false;
  bool attached_ = false;
  LaunchArgs args_{};
};

}  // namespace car
