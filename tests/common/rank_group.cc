#include "rank_group.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace car::testing {

void checkCuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, cudaGetErrorString(err));
  std::abort();
}

int coResidentBlockLimit(int device, int ranks, bool pdl) {
  int multiprocessors = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  // __launch_bounds__(512, 1) guarantees one block per multiprocessor; count only that.
  return std::max(1, std::min(kMaxPushBlocks, multiprocessors / (ranks * (pdl ? 2 : 1))));
}

int computeCapability(int device) {
  int major = 0, minor = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CHECK_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

RankGroup::RankGroup(int device, int ranks, const Config& config)
    : RankGroup(device, ranks, [&config](int) { return config; }) {}

RankGroup::RankGroup(int device, int ranks, const std::function<Config(int rank)>& configOfRank) {
  CHECK_CUDA(cudaSetDevice(device));
  std::vector<Config> configs;
  std::vector<void*> bases;
  cudaStream_t preparing = nullptr;  // the blocks are filled on a non-blocking stream, as the set-up does
  CHECK_CUDA(cudaStreamCreateWithFlags(&preparing, cudaStreamNonBlocking));
  for (int r = 0; r < ranks; ++r) {
    configs.push_back(configOfRank(r));
    std::string problem;
    std::unique_ptr<BufferBlock> block = BufferBlock::create(SysvReleaseBoard::create(&problem));
    if (!block) {
      std::fprintf(stderr, "rank %d: %s\n", r, problem.c_str());
      std::abort();
    }
    CHECK_CUDA(block->allocate(device, blockLayoutFor(configs.back()), preparing));
    bases.push_back(block->base());
    blocks_.push_back(std::move(block));
  }
  CHECK_CUDA(cudaStreamDestroy(preparing));
  // One GPU counts as NVLink-connected to itself.
  const int capability = computeCapability(device);
  for (int r = 0; r < ranks; ++r) {
    EngineOptions options;
    options.device = device;
    options.rank = r;
    options.ranks = ranks;
    options.config = configs[r];
    std::unique_ptr<Launcher> launcher;
    CHECK_CUDA(Launcher::create(options, &launcher));
    launcher->attachPeers(bases.data(), blocks_[r]->layout());
    engines_.push_back(std::make_unique<TestRank>(std::move(launcher), CommunicatorFacts{ranks, true, capability}));
    cudaStream_t stream = nullptr;
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    streams_.push_back(stream);
  }
}

SubmitResult TestRank::submit(const CollectiveCall& call) {
  SubmitResult result;
  const CallPlan plan = this->plan(call);
  if (!plan.ours) {
    result.reason = plan.reason;
    stats_.countForwarded(plan.reason);
    return result;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  result.error = launcher_->launch(call, plan, &result.launched);
  if (!result.launched) {
    result.reason = ForwardReason::Failed;
    stats_.countForwarded(ForwardReason::Failed);
    return result;
  }
  result.algorithm = plan.algorithm;
  stats_.countTaken(plan.algorithm, plan.bytes);
  return result;
}

RankGroup::~RankGroup() {
  synchronize();
  engines_.clear();
  blocks_.clear();
  for (cudaStream_t stream : streams_) cudaStreamDestroy(stream);
}

bool RankGroup::submit(Collective collective, const std::vector<const void*>& send, const std::vector<void*>& recv,
                       std::size_t count, ElementType type, ReduceOp op, std::string* why, Algorithm* ran) {
  bool allLaunched = true;
  std::optional<Algorithm> first;
  for (int r = 0; r < ranks(); ++r) {
    CollectiveCall call;
    call.collective = collective;
    call.send = send[r];
    call.recv = recv[r];
    call.count = count;
    call.type = type;
    call.op = op;
    call.stream = streams_[r];
    SubmitResult result = engines_[r]->submit(call);
    if (result.launched && !first) first = result.algorithm;
    if (result.launched && result.algorithm != *first) {
      allLaunched = false;
      if (why != nullptr) *why = "ranks chose different kernels";
    }
    if (!result.launched) {
      allLaunched = false;
      if (why != nullptr) {
        *why = std::string("rank ") + std::to_string(r) + ": " + forwardReasonName(result.reason) +
               (result.error != cudaSuccess ? std::string(" ") + cudaGetErrorString(result.error) : "");
      }
    }
  }
  if (ran != nullptr && first) *ran = *first;
  return allLaunched;
}

void RankGroup::synchronize() {
  for (cudaStream_t stream : streams_) CHECK_CUDA(cudaStreamSynchronize(stream));
}

}  // namespace car::testing
