#include "nccl_bench_rank.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "nccl_bench_check.h"

namespace bench {
namespace {

constexpr std::size_t kScratchBytes = 4096;            // largestOverRanks: 3 * 100 samples + 2, as doubles
constexpr std::size_t kCublasWorkspace = 32 << 20;     // set, so that capturing a GEMM allocates nothing
constexpr int kWarmUpSamples = 2;                      // timeFloor, timePaired: untimed samples first

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

void RankBench::allGatherFirst(std::size_t bytes) {
  cudaStream_t own = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  void* send = deviceMemory(bytes);
  void* recv = deviceMemory(bytes * ranks_);
  CUDA_OK(cudaMemsetAsync(send, rank_, bytes, own));
  NCCL_OK(ncclAllGather(send, recv, bytes, ncclUint8, comm_, own));
  CUDA_OK(cudaStreamSynchronize(own));
  CUDA_OK(cudaStreamDestroy(own));
}

void RankBench::createCommunicators(const ncclUniqueId& id) {
  if (!options_.setUpAnotherFirst) {
    NCCL_OK(ncclCommInitRank(&comm_, ranks_, id, rank_));
    return;
  }
  // The library sets a blocking communicator up inside the call that creates it, and gives it
  // its block then: the other communicator is created first and takes the block, and the one
  // timed, split from it, comes second and is refused when one block is all there is room for.
  NCCL_OK(ncclCommInitRank(&another_, ranks_, id, rank_));
  constexpr std::size_t kCount = 1024;  // 4 KiB of float: a call the library takes
  constexpr int kCalls = 50;
  cudaStream_t own = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  float* buffer = static_cast<float*>(deviceMemory(kCount * sizeof(float)));
  std::vector<float> ones(kCount, 1.0f), sums(kCount);
  for (int call = 0; call < kCalls; ++call) {
    CUDA_OK(cudaMemcpyAsync(buffer, ones.data(), kCount * sizeof(float), cudaMemcpyHostToDevice, own));
    NCCL_OK(ncclAllReduce(buffer, buffer, kCount, ncclFloat32, ncclSum, another_, own));
    CUDA_OK(cudaMemcpyAsync(sums.data(), buffer, kCount * sizeof(float), cudaMemcpyDeviceToHost, own));
    CUDA_OK(cudaStreamSynchronize(own));
    const bool right =
        std::all_of(sums.begin(), sums.end(), [&](float sum) { return sum == static_cast<float>(ranks_); });
    BENCH_CHECK(right, "--set-up-another-first: an all-reduce on the other communicator summed wrong");
  }
  CUDA_OK(cudaStreamDestroy(own));
  NCCL_OK(ncclCommSplit(another_, 0, rank_, &comm_, nullptr));
  // The script checks the library's log against these: the timed one refused, the other set up.
  std::fprintf(stderr, "car_nccl_bench rank %d: timed communicator %p, the other %p\n", rank_,
               static_cast<void*>(comm_), static_cast<void*>(another_));
}

Pattern RankBench::upload(const std::vector<unsigned char>& table, const TypeInfo& type, int ranks) {
  void* device = deviceMemory(table.size());
  CUDA_OK(cudaMemcpy(device, table.data(), table.size(), cudaMemcpyHostToDevice));
  return Pattern{device, valuePeriod(ranks), type.bytes};
}

RankBench::RankBench(const Options& options, int rank, int ranks, int device, const ncclUniqueId& id)
    : options_(options), rank_(rank), ranks_(ranks) {
  const TypeInfo& type = *options.type;
  CUDA_OK(cudaSetDevice(device));
  createCommunicators(id);
  if (options.firstAllGatherBytes > 0) allGatherFirst(options.firstAllGatherBytes);
  CUDA_OK(cudaStreamCreateWithFlags(&main_, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  for (cudaEvent_t* event : {&start_, &stop_}) CUDA_OK(cudaEventCreate(event));
  for (cudaEvent_t* event : {&fork_, &join_}) CUDA_OK(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
  if (options.floor) {
    floor_ = std::make_unique<CallFloor>();
    BENCH_CHECK(floor_->ok(), "the CUDA floor's driver entry points (--floor)");
  }

  for (std::size_t size : options.sizes) maxCount_ = std::max(maxCount_, size / type.bytes);
  maxCount_ = rounded(std::max<std::size_t>(maxCount_, ranks));
  const std::size_t maxBytes = maxCount_ * type.bytes;
  for (int i = 0; i < 2; ++i) {
    in_[i] = allocate(maxBytes);
    out_[i] = allocate(maxBytes);
  }
  const bool afterLarge =
      std::find(options.workloads.begin(), options.workloads.end(), Workload::AfterLarge) != options.workloads.end();
  if (afterLarge) {
    largeCount_ = rounded(std::max<std::size_t>(ranks, options.largeBytes / type.bytes));
    largeIn_ = allocate(largeCount_ * type.bytes);
    largeOut_ = allocate(largeCount_ * type.bytes);
  }
  if (std::find(options.modes.begin(), options.modes.end(), Mode::Model) != options.modes.end()) {
    const Gemm& g = options.gemm;
    const std::size_t aBytes = std::size_t{2} * g.m * g.k, bBytes = std::size_t{2} * g.k * g.n;
    gemmA_ = deviceMemory(aBytes);
    gemmB_ = deviceMemory(bBytes);
    gemmC_ = deviceMemory(std::size_t{2} * g.m * g.n);
    // Small values (0x3c3c is about 0.0115 in bf16): no overflow, and a GEMM is as fast on them as on any.
    CUDA_OK(cudaMemset(gemmA_, 0x3c, aBytes));
    CUDA_OK(cudaMemset(gemmB_, 0x3c, bBytes));
    CUBLAS_OK(cublasCreate(&cublas_));
    CUBLAS_OK(cublasSetStream(cublas_, main_));
    CUBLAS_OK(cublasSetWorkspace(cublas_, deviceMemory(kCublasWorkspace), kCublasWorkspace));
  }
  scratch_ = deviceMemory(kScratchBytes);
  sink_ = static_cast<unsigned*>(deviceMemory(sizeof(unsigned)));
  seedCounter_ = static_cast<unsigned long long*>(deviceMemory(sizeof(unsigned long long)));
  wrong_ = static_cast<unsigned long long*>(deviceMemory(sizeof(unsigned long long)));
  CUDA_OK(cudaMemset(seedCounter_, 0, sizeof(unsigned long long)));

  input_ = upload(patternTable(type, options.op->op, rank, ranks), type, ranks);
  expected_ = upload(patternTable(type, options.op->op, -1, ranks), type, ranks);
  if (options.collective == Collective::AllGather) {
    for (int q = 0; q < ranks; ++q) inputOfRank_.push_back(upload(patternTable(type, options.op->op, q, ranks), type, ranks));
  }
  checkOnHost_ = options.collective != Collective::AllGather && tolerance(type, options.op->op, ranks) > 0;
  floating_ = type.kind == Kind::Float;
  if (largeIn_ != nullptr) {
    CUDA_OK(writePattern(largeIn_, inputCount(largeCount_), input_, Seed{}, main_));  // seed 0, once
  }
  CUDA_OK(cudaStreamSynchronize(main_));
}

RankBench::~RankBench() {
  cudaStreamSynchronize(main_);
  cudaStreamSynchronize(side_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  for (const Allocation& allocation : allocations_) {
    if (allocation.window != nullptr) ncclCommWindowDeregister(comm_, allocation.window);
    if (allocation.fromNccl) ncclMemFree(allocation.pointer);
    else cudaFree(allocation.pointer);
  }
  ncclCommDestroy(comm_);
  if (another_ != nullptr) ncclCommDestroy(another_);
}

void* RankBench::allocate(std::size_t bytes) {
  void* pointer = nullptr;
  ncclWindow_t window = nullptr;
  if (options_.symmetric) {
    NCCL_OK(ncclMemAlloc(&pointer, bytes));
    // Without symmetric support (the one-GPU rig: NCCL sees one host per rank) NCCL registers
    // nothing and leaves the window null.
    NCCL_OK(ncclCommWindowRegister(comm_, pointer, bytes, &window, NCCL_WIN_COLL_SYMMETRIC));
  } else {
    CUDA_OK(cudaMalloc(&pointer, bytes));
  }
  allocations_.push_back({pointer, window, options_.symmetric});
  return pointer;
}

void* RankBench::deviceMemory(std::size_t bytes) {
  void* pointer = nullptr;
  CUDA_OK(cudaMalloc(&pointer, bytes));
  allocations_.push_back({pointer, nullptr, false});
  return pointer;
}

std::size_t RankBench::inputCount(std::size_t count) const {
  return options_.collective == Collective::AllGather ? count / ranks_ : count;
}

std::size_t RankBench::outputCount(std::size_t count) const {
  return options_.collective == Collective::ReduceScatter ? count / ranks_ : count;
}

std::size_t RankBench::rounded(std::size_t count) const {
  return options_.collective == Collective::AllReduce ? count : count - count % ranks_;
}

// The one place a collective is called.
void RankBench::collective(const void* send, void* recv, std::size_t count, bool twoStreams, double* hostMicros) {
  cudaStream_t stream = main_;
  if (twoStreams) {
    CUDA_OK(cudaEventRecord(fork_, main_));
    CUDA_OK(cudaStreamWaitEvent(side_, fork_, 0));
    stream = side_;
  }
  const ncclDataType_t type = options_.type->type;
  const ncclRedOp_t op = options_.op->op;
  const auto issued = std::chrono::steady_clock::now();
  // Direct: NCCL's own entry points (its pnccl aliases), which the library does not hook.
  switch (options_.collective) {
    case Collective::AllReduce:
      if (direct_) NCCL_OK(pncclAllReduce(send, recv, count, type, op, comm_, stream));
      else NCCL_OK(ncclAllReduce(send, recv, count, type, op, comm_, stream));
      break;
    case Collective::AllGather:
      if (direct_) NCCL_OK(pncclAllGather(send, recv, count / ranks_, type, comm_, stream));
      else NCCL_OK(ncclAllGather(send, recv, count / ranks_, type, comm_, stream));
      break;
    case Collective::ReduceScatter:
      if (direct_) NCCL_OK(pncclReduceScatter(send, recv, count / ranks_, type, op, comm_, stream));
      else NCCL_OK(ncclReduceScatter(send, recv, count / ranks_, type, op, comm_, stream));
      break;
  }
  if (hostMicros != nullptr) {
    *hostMicros += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - issued).count();
  }
  if (twoStreams) {
    CUDA_OK(cudaEventRecord(join_, side_));
    CUDA_OK(cudaStreamWaitEvent(main_, join_, 0));
  }
}

void RankBench::gemm() {
  const Gemm& g = options_.gemm;
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_OK(cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &alpha, gemmA_, CUDA_R_16BF, g.m, gemmB_,
                         CUDA_R_16BF, g.k, &beta, gemmC_, CUDA_R_16BF, g.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// Model: layer l reads in_[l % 2] and writes out_[l % 2] (in place: in_[l % 2] itself), and
// its elementwise kernel writes the next layer's input; the last one writes the next step's
// first input. Isolated: in_[0] to out_[0]. Chain: in_[call % 2] to out_[0]. In place as NCCL
// defines it: an all-gather's input is the rank's block of its output, a reduce-scatter's
// output the rank's block of its input.
const void* RankBench::sendOf(const Plan& plan, int call) const {
  char* buffer = static_cast<char*>(plan.mode == Mode::Isolated ? in_[0] : in_[call % 2]);
  const bool inPlaceGather = plan.workload == Workload::InPlace && options_.collective == Collective::AllGather;
  return inPlaceGather ? buffer + rank_ * (plan.count / ranks_) * options_.type->bytes : buffer;
}

void* RankBench::recvOf(const Plan& plan, int call) const {
  if (plan.workload == Workload::InPlace) {
    char* buffer = static_cast<char*>(plan.mode == Mode::Isolated ? in_[0] : in_[call % 2]);
    const bool scatter = options_.collective == Collective::ReduceScatter;
    return scatter ? buffer + rank_ * (plan.count / ranks_) * options_.type->bytes : buffer;
  }
  return plan.mode == Mode::Model ? out_[call % 2] : out_[0];
}

double RankBench::issueStep(const Plan& plan, bool withCalls) {
  const bool twoStreams = plan.workload == Workload::TwoStreams;
  const std::size_t outputBytes = outputCount(plan.count) * options_.type->bytes;
  const std::size_t inputs = inputCount(plan.count);
  double host = 0;
  for (int call = 0; call < plan.callsPerStep; ++call) {
    switch (plan.mode) {
      case Mode::Model:
        gemm();
        if (withCalls) collective(sendOf(plan, call), recvOf(plan, call), plan.count, twoStreams, &host);
        CUDA_OK(consumeAndWritePattern(recvOf(plan, call), outputBytes, sink_,
                                       const_cast<void*>(sendOf(plan, call + 1)), inputs, input_, Seed{seedCounter_, static_cast<unsigned long long>(call) + 1},
                                       main_));
        break;
      case Mode::Isolated:
        if (plan.workload == Workload::AfterLarge) collective(largeIn_, largeOut_, largeCount_, false, nullptr);
        CUDA_OK(writePattern(const_cast<void*>(sendOf(plan, call)), inputs, input_,
                             Seed{seedCounter_, static_cast<unsigned long long>(call)}, main_));
        if (withCalls) collective(sendOf(plan, call), recvOf(plan, call), plan.count, twoStreams, &host);
        break;
      case Mode::Chain:
        collective(sendOf(plan, call), recvOf(plan, call), plan.count, twoStreams, &host);
        break;
    }
  }
  if (plan.mode != Mode::Chain) CUDA_OK(advanceSeeds(seedCounter_, plan.callsPerStep, main_));
  return host;
}

double RankBench::runStep(const Plan& plan, bool withCalls, cudaGraphExec_t exec) {
  double host = 0;
  if (exec != nullptr) CUDA_OK(cudaGraphLaunch(exec, main_));
  else host = issueStep(plan, withCalls);
  if (plan.mode != Mode::Chain) seedBase_ += plan.callsPerStep;
  return host;
}

cudaGraphExec_t RankBench::capture(const Plan& plan, bool withCalls) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(main_, cudaStreamCaptureModeThreadLocal));
  issueStep(plan, withCalls);
  CUDA_OK(cudaStreamEndCapture(main_, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphDestroy(graph));
  return exec;
}

// Model and isolated steps write their inputs themselves; the model's first one comes from
// the step before, so the first step of a row needs it written.
void RankBench::writeFirstInput(const Plan& plan) {
  if (plan.mode == Mode::Model) {
    CUDA_OK(writePattern(const_cast<void*>(sendOf(plan, 0)), inputCount(plan.count), input_, Seed{seedCounter_, 0},
                         main_));
  }
}

// Chain: both inputs new before each sample, outside the timed part. The device counter
// moves on with seedBase_, which it mirrors: the next model or isolated row seeds from it.
void RankBench::writeChainInputs(const Plan& plan) {
  for (int i = 0; i < 2; ++i) {
    CUDA_OK(writePattern(in_[i], inputCount(plan.count), input_, Seed{nullptr, seedBase_ + i}, main_));
  }
  seedBase_ += 2;
  CUDA_OK(advanceSeeds(seedCounter_, 2, main_));
}

// A rank's output, per collective: all-reduce, the reduced message; reduce-scatter, block
// `rank` of it (the expected pattern seen from that block's first element); all-gather, each
// rank's input in its block.
void RankBench::writeExpected(void* output, std::size_t count, unsigned long long seed) {
  const std::size_t part = count / ranks_, partBytes = part * options_.type->bytes;
  switch (options_.collective) {
    case Collective::AllReduce:
      CUDA_OK(writePattern(output, count, expected_, Seed{nullptr, seed}, main_));
      break;
    case Collective::ReduceScatter:
      CUDA_OK(writePattern(output, part, expected_, Seed{nullptr, seed + rank_ * part}, main_));
      break;
    case Collective::AllGather:
      for (int q = 0; q < ranks_; ++q) {
        CUDA_OK(writePattern(static_cast<char*>(output) + q * partBytes, part, inputOfRank_[q], Seed{nullptr, seed}, main_));
      }
      break;
  }
}

void RankBench::deviceCheck(const void* output, std::size_t count, unsigned long long seed) {
  const std::size_t part = count / ranks_, partBytes = part * options_.type->bytes;
  switch (options_.collective) {
    case Collective::AllReduce:
      CUDA_OK(countMismatches(output, count, expected_, Seed{nullptr, seed}, floating_, wrong_, main_));
      break;
    case Collective::ReduceScatter:
      CUDA_OK(countMismatches(output, part, expected_, Seed{nullptr, seed + rank_ * part}, floating_, wrong_, main_));
      break;
    case Collective::AllGather:
      for (int q = 0; q < ranks_; ++q) {
        CUDA_OK(countMismatches(static_cast<const char*>(output) + q * partBytes, part, inputOfRank_[q],
                                Seed{nullptr, seed}, floating_, wrong_, main_));
      }
      break;
  }
}

unsigned long long RankBench::hostChecked(const void* output, std::size_t count, unsigned long long seed) {
  const TypeInfo& type = *options_.type;
  const ncclRedOp_t op = options_.op->op;
  const std::size_t part = count / ranks_;
  std::vector<unsigned char> data(outputCount(count) * type.bytes);
  CUDA_OK(cudaMemcpyAsync(data.data(), output, data.size(), cudaMemcpyDeviceToHost, main_));
  CUDA_OK(cudaStreamSynchronize(main_));
  switch (options_.collective) {
    case Collective::AllReduce: return wrongElements(type, op, ranks_, seed, data.data(), count);
    case Collective::ReduceScatter: return wrongElements(type, op, ranks_, seed + rank_ * part, data.data(), part);
    case Collective::AllGather: break;
  }
  unsigned long long wrong = 0;
  for (int q = 0; q < ranks_; ++q) wrong += wrongCopies(type, op, q, ranks_, seed, &data[q * part * type.bytes], part);
  return wrong;
}

void RankBench::checkLastCall(const Plan& plan, unsigned long long sampleSeed) {
  const int last = plan.callsPerStep - 1;
  const unsigned long long seed = sampleSeed + (plan.mode == Mode::Chain ? last % 2 : last);
  const void* output = recvOf(plan, last);
  if (checkOnHost_) {
    hostWrong_ += hostChecked(output, plan.count, seed);
  } else {
    deviceCheck(output, plan.count, seed);
  }
  // The call before each timed one: its input never changes (seed 0), its output is checked too.
  if (plan.workload == Workload::AfterLarge) {
    if (checkOnHost_) hostWrong_ += hostChecked(largeOut_, largeCount_, 0);
    else deviceCheck(largeOut_, largeCount_, 0);
  }
}

// One row pair (or, isolated eager, three rows with the host time) of a mode at one size.
// Each sample times one step with the calls and, but for chain, one without them right
// after, so that drift hits both; the per-call figure is their difference over the calls.
std::vector<Row> RankBench::timeForm(const Plan& plan, bool graph) {
  const bool baseline = plan.mode != Mode::Chain;
  const int samples = options_.samples;
  writeFirstInput(plan);
  cudaGraphExec_t with = graph ? capture(plan, true) : nullptr;
  cudaGraphExec_t without = graph && baseline ? capture(plan, false) : nullptr;
  for (int warmUp = 0; warmUp < 2; ++warmUp) {
    if (plan.mode == Mode::Chain) writeChainInputs(plan);
    runStep(plan, true, with);
    if (baseline) runStep(plan, false, without);
  }
  CUDA_OK(cudaMemsetAsync(wrong_, 0, sizeof(unsigned long long), main_));
  hostWrong_ = 0;
  std::vector<double> times(3 * samples, 0.0);  // with, without, host: per sample
  for (int s = 0; s < samples; ++s) {
    if (plan.mode == Mode::Chain) writeChainInputs(plan);
    const unsigned long long sampleSeed = plan.mode == Mode::Chain ? seedBase_ - 2 : seedBase_;
    barrier();
    CUDA_OK(cudaEventRecord(start_, main_));
    times[2 * samples + s] = runStep(plan, true, with) / plan.callsPerStep;
    CUDA_OK(cudaEventRecord(stop_, main_));
    times[s] = elapsedMicros();
    checkLastCall(plan, sampleSeed);
    if (baseline) {
      barrier();
      CUDA_OK(cudaEventRecord(start_, main_));
      runStep(plan, false, without);
      CUDA_OK(cudaEventRecord(stop_, main_));
      times[samples + s] = elapsedMicros();
    }
  }
  unsigned long long deviceWrong = 0;
  CUDA_OK(cudaMemcpyAsync(&deviceWrong, wrong_, sizeof deviceWrong, cudaMemcpyDeviceToHost, main_));
  CUDA_OK(cudaStreamSynchronize(main_));
  if (with != nullptr) CUDA_OK(cudaGraphExecDestroy(with));
  if (without != nullptr) CUDA_OK(cudaGraphExecDestroy(without));

  std::vector<double> shared = times;
  shared.push_back(static_cast<double>(deviceWrong + hostWrong_));
  shared = largestOverRanks(shared);
  const std::size_t bytes = plan.count * options_.type->bytes;
  const std::string form = std::string(modeName(plan.mode)) + (graph ? "-graph" : "-eager");
  Row row{form, plan.workload, bytes, 0, samples, shared.back(), {}};
  for (int s = 0; s < samples; ++s) row.samples.push_back((shared[s] - shared[samples + s]) / plan.callsPerStep);
  row.us = median(row.samples);
  std::vector<Row> rows = {row};
  if (plan.mode == Mode::Isolated && !graph) {
    Row host{"host", plan.workload, bytes, 0, samples, row.wrong,
             std::vector<double>(shared.begin() + 2 * samples, shared.begin() + 3 * samples)};
    host.us = median(host.samples);
    rows.push_back(host);
  }
  return rows;
}

// The floor of the isolated eager row: the same step, each call replaced by CallFloor's
// launch and record, host time per call as the host row takes it (the mean over a sample's
// calls, the largest over ranks, the median over samples). No output: nothing checked.
Row RankBench::timeFloor(const Plan& plan) {
  const int samples = options_.samples;
  std::vector<double> perCall(samples, 0.0);
  for (int s = -kWarmUpSamples; s < samples; ++s) {
    barrier();
    double micros = 0;
    for (int call = 0; call < plan.callsPerStep; ++call) {
      CUDA_OK(writePattern(const_cast<void*>(sendOf(plan, call)), inputCount(plan.count), input_,
                           Seed{seedCounter_, static_cast<unsigned long long>(call)}, main_));
      const auto issued = std::chrono::steady_clock::now();
      BENCH_CHECK(floor_->enqueue(main_), "the CUDA floor's launch and record");
      micros += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - issued).count();
    }
    CUDA_OK(cudaStreamSynchronize(main_));
    if (s >= 0) perCall[s] = micros / plan.callsPerStep;
  }
  Row row{"floor", plan.workload, plan.count * options_.type->bytes, 0, 0, 0, largestOverRanks(perCall)};
  row.us = median(row.samples);
  return row;
}

// Host time per call through the hook and through NCCL's own entry point, on the same
// communicator and buffers, sample by sample in turn (which goes first alternates), each sample
// as the host row times one (the largest over the ranks) and its last call checked, warm-ups
// included: the rows paired-hook and paired-direct, whose per-sample difference is what the
// hook adds to a call. With --after-large, the call before each timed one goes the same way.
std::vector<Row> RankBench::timePaired(const Plan& plan) {
  const int samples = options_.samples;
  std::vector<double> times(2 * samples, 0.0);  // through the hook, then direct
  double wrong[2] = {0, 0};                     // the same order
  for (int s = -kWarmUpSamples; s < samples; ++s) {
    for (int turn = 0; turn < 2; ++turn) {
      direct_ = (turn == 1) != (s % 2 != 0);  // s % 2 is -1 for odd negative s
      const unsigned long long sampleSeed = seedBase_;
      barrier();
      const double perCall = runStep(plan, true, nullptr) / plan.callsPerStep;
      CUDA_OK(cudaMemsetAsync(wrong_, 0, sizeof(unsigned long long), main_));
      hostWrong_ = 0;
      checkLastCall(plan, sampleSeed);
      unsigned long long deviceWrong = 0;
      CUDA_OK(cudaMemcpyAsync(&deviceWrong, wrong_, sizeof deviceWrong, cudaMemcpyDeviceToHost, main_));
      CUDA_OK(cudaStreamSynchronize(main_));
      wrong[direct_ ? 1 : 0] += static_cast<double>(deviceWrong + hostWrong_);
      if (s >= 0) times[(direct_ ? samples : 0) + s] = perCall;
    }
  }
  direct_ = false;
  hostWrong_ = 0;
  std::vector<double> shared = times;
  shared.push_back(wrong[0]);
  shared.push_back(wrong[1]);
  shared = largestOverRanks(shared);
  const std::size_t bytes = plan.count * options_.type->bytes;
  std::vector<Row> rows;
  for (int form = 0; form < 2; ++form) {
    Row row{form == 0 ? "paired-hook" : "paired-direct", plan.workload, bytes, 0, samples + kWarmUpSamples,
            shared[2 * samples + form], {}};
    row.samples.assign(shared.begin() + form * samples, shared.begin() + (form + 1) * samples);
    row.us = median(row.samples);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<Row> RankBench::measure(Mode mode, Workload workload, std::size_t count) {
  if ((mode == Mode::Chain && workload == Workload::InPlace) ||
      (workload == Workload::AfterLarge && mode != Mode::Isolated)) {
    return {};
  }
  const Plan plan{mode, workload, count, mode == Mode::Model ? options_.layers : options_.calls};
  std::vector<Row> rows = timeForm(plan, true);
  for (Row& row : timeForm(plan, false)) rows.push_back(std::move(row));
  if (floor_ && mode == Mode::Isolated) rows.push_back(timeFloor(plan));
  if (options_.pairedDirect && mode == Mode::Isolated) {
    for (Row& row : timePaired(plan)) rows.push_back(std::move(row));
  }
  return rows;
}

Row RankBench::probe(std::size_t count) {
  const Plan plan{Mode::Isolated, Workload::Plain, count, 1};
  CUDA_OK(cudaMemsetAsync(out_[0], 0xFF, outputCount(count) * options_.type->bytes, main_));  // not last call's
  const unsigned long long seed = seedBase_;
  runStep(plan, true, nullptr);
  const double wrong = largestOverRanks({static_cast<double>(hostChecked(out_[0], count, seed))})[0];
  return Row{"probe", Workload::Plain, count * options_.type->bytes, -1, 1, wrong, {}};
}

// The collective's right output passes both checks, and one with its first, middle and last
// elements changed (each the bitwise complement of the right one) fails both, by exactly those.
bool RankBench::checkerSeesErrors() {
  const unsigned long long seed = 7;
  const int bytes = options_.type->bytes;
  writeExpected(out_[0], maxCount_, seed);
  std::vector<unsigned char> data(outputCount(maxCount_) * bytes);
  CUDA_OK(cudaMemcpyAsync(data.data(), out_[0], data.size(), cudaMemcpyDeviceToHost, main_));
  CUDA_OK(cudaStreamSynchronize(main_));
  const std::size_t last = outputCount(maxCount_) - 1;
  bool right = hostChecked(out_[0], maxCount_, seed) == 0;
  std::vector<std::size_t> planted = {0, last / 2, last};
  planted.erase(std::unique(planted.begin(), planted.end()), planted.end());
  for (std::size_t at : planted)
    for (int b = 0; b < bytes; ++b) data[at * bytes + b] ^= 0xFF;
  CUDA_OK(cudaMemcpyAsync(out_[0], data.data(), data.size(), cudaMemcpyHostToDevice, main_));
  CUDA_OK(cudaMemsetAsync(wrong_, 0, sizeof(unsigned long long), main_));
  deviceCheck(out_[0], maxCount_, seed);
  unsigned long long seen = 0;
  CUDA_OK(cudaMemcpyAsync(&seen, wrong_, sizeof seen, cudaMemcpyDeviceToHost, main_));
  CUDA_OK(cudaStreamSynchronize(main_));
  right = right && seen == planted.size() && hostChecked(out_[0], maxCount_, seed) == planted.size();
  return largestOverRanks({right ? 0.0 : 1.0})[0] == 0.0;
}

void RankBench::reduceMax(void* buffer, std::size_t count, ncclDataType_t type) {
  if (options_.ncclBarrier) NCCL_OK(pncclAllReduce(buffer, buffer, count, type, ncclMax, comm_, main_));
  else NCCL_OK(ncclAllReduce(buffer, buffer, count, type, ncclMax, comm_, main_));
}

// Every rank starts a sample together: a tiny all-reduce, then wait for it.
void RankBench::barrier() {
  reduceMax(scratch_, 1, ncclFloat32);
  CUDA_OK(cudaStreamSynchronize(main_));
}

std::vector<double> RankBench::largestOverRanks(const std::vector<double>& values) {
  BENCH_CHECK(values.size() * sizeof(double) <= kScratchBytes, "largestOverRanks: too many values");
  std::vector<double> result(values);
  CUDA_OK(cudaMemcpyAsync(scratch_, result.data(), result.size() * sizeof(double), cudaMemcpyHostToDevice, main_));
  reduceMax(scratch_, result.size(), ncclFloat64);
  CUDA_OK(cudaMemcpyAsync(result.data(), scratch_, result.size() * sizeof(double), cudaMemcpyDeviceToHost, main_));
  CUDA_OK(cudaStreamSynchronize(main_));
  return result;
}

double RankBench::elapsedMicros() {
  CUDA_OK(cudaEventSynchronize(stop_));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms * 1000.0;
}

}  // namespace bench
