// Several ranks of one communicator on one GPU in one process: one launcher, one buffer
// block (allocated as the shim allocates it) and one stream per rank, the peers' blocks
// attached by plain pointer. Used by the GPU tests and the benchmark.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ipc/buffer_block.h"
#include "launcher.h"
#include "stats.h"

namespace car::testing {

// Aborts the test program (not library code) with the failing call and its error string.
void checkCuda(cudaError_t err, const char* what, const char* file, int line);
#define CHECK_CUDA(call) ::car::testing::checkCuda((call), #call, __FILE__, __LINE__)

// Blocks per rank so that every rank's blocks are resident at once on one GPU: spinning
// blocks that wait for a block that cannot be scheduled would wait forever. With
// programmatic dependent launch a rank's next kernel may already hold its multiprocessors
// while it waits for the current one, so each rank gets room for two grids then.
int coResidentBlockLimit(int device, int ranks, bool pdl = true);

// The device's compute capability as the policy reads it (major * 10 + minor: 90 for sm_90).
int computeCapability(int device);

// What TestRank::submit did with a call.
struct SubmitResult {
  bool launched = false;  // our kernel is on the stream
  Algorithm algorithm = Algorithm::OneStage;       // when launched
  ForwardReason reason = ForwardReason::NotReady;  // when not launched
  cudaError_t error = cudaSuccess;                 // a CUDA call on the launch path failed
};

// One rank as the library's communicator drives its launcher (shim/lifecycle/communicator.h):
// the plan (planCall), then the launch, one call at a time, counted once.
class TestRank {
 public:
  TestRank(std::unique_ptr<Launcher> launcher, const CommunicatorFacts& facts)
      : launcher_(std::move(launcher)), facts_(facts) {}
  SubmitResult submit(const CollectiveCall& call);
  CallPlan plan(const CallFacts& call) const { return planCall(facts_, call, launcher_->config()); }
  CallStats& stats() { return stats_; }
  Launcher& launcher() { return *launcher_; }
  void raiseAbort() { launcher_->raiseAbort(); }
  std::uint64_t driverLaunches() {
    std::lock_guard<std::mutex> lock(mutex_);
    return launcher_->driverLaunches();
  }
  bool waitIdleWithin(double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    return launcher_->waitIdleWithin(seconds);
  }
  cudaError_t presetRound(std::uint32_t round) {
    std::lock_guard<std::mutex> lock(mutex_);
    return launcher_->presetRound(round);
  }

 private:
  std::mutex mutex_;  // the communicator's lock: one launch at a time
  std::unique_ptr<Launcher> launcher_;
  CommunicatorFacts facts_;
  CallStats stats_;
};

class RankGroup {
 public:
  RankGroup(int device, int ranks, const Config& config);
  // Rank r gets configOfRank(r): for settings that may differ between ranks.
  RankGroup(int device, int ranks, const std::function<Config(int rank)>& configOfRank);
  ~RankGroup();

  int ranks() const { return static_cast<int>(engines_.size()); }
  TestRank& engine(int rank) { return *engines_[rank]; }
  cudaStream_t stream(int rank) const { return streams_[rank]; }
  const BufferBlock& block(int rank) const { return *blocks_[rank]; }

  // Submits one all-reduce per rank (send[r] -> recv[r]) on each rank's stream; returns
  // false (with the reason in *why) if any rank did not launch, or if the ranks chose
  // different kernels. *ran, when given, receives the kernel that ran.
  bool allReduce(const std::vector<const void*>& send, const std::vector<void*>& recv,
                 std::size_t count, ElementType type, std::string* why = nullptr, Algorithm* ran = nullptr) {
    return allReduce(send, recv, count, type, ReduceOp::Sum, why, ran);
  }
  bool allReduce(const std::vector<const void*>& send, const std::vector<void*>& recv, std::size_t count,
                 ElementType type, ReduceOp op, std::string* why = nullptr, Algorithm* ran = nullptr) {
    return submit(Collective::AllReduce, send, recv, count, type, op, why, ran);
  }
  // The same for any collective; `count` is NCCL's (kernels/algorithms.h, Collective).
  bool submit(Collective collective, const std::vector<const void*>& send, const std::vector<void*>& recv,
              std::size_t count, ElementType type, ReduceOp op, std::string* why = nullptr, Algorithm* ran = nullptr);
  void synchronize();

 private:
  std::vector<std::unique_ptr<BufferBlock>> blocks_;
  std::vector<std::unique_ptr<TestRank>> engines_;  // after the blocks: destroyed first
  std::vector<cudaStream_t> streams_;
};

}  // namespace car::testing
