// Times the engine with several ranks on one GPU (one process, one stream per rank):
// median microseconds per all-reduce, per world size, kernel and size: eager, eager with a
// pull kernel's input copied inside the kernel (NCCL_CAR_COPY_IN_KERNEL_BYTES; push kernels
// never copy), replayed from a CUDA graph, and the host time of one rank's eager call
// through the engine (no NCCL hook on that path). On one GPU this measures our kernels, waits
// and launch path, not NVLink.
//
// The calls run back to back (a chain, which flatters programmatic dependent launch: see
// car_nccl_bench's model-like and isolated modes for what a model sees). Every output is
// checked as car_nccl_bench checks it: before each sample every rank's two inputs get new
// seeds (bench_values.h), the calls take turns with them, and the output of the sample's last
// call is compared exactly on the device; `wrong` counts the wrong elements over all ranks
// and samples, and a wrong row makes the exit status 1.
//
//   car_bench [--ranks 2,4,8] [--type bf16|fp16|fp32] [--kernels 1shot,2shot,1stage,2stage]
//             [--pdl 0|1] [--max-blocks N] [--markdown]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_kernels.h"
#include "bench_values.h"
#include "policy.h"
#include "rank_group.h"

using namespace car;
using namespace car::testing;

namespace {

constexpr int kDevice = 0;
// As the seed's kernels were timed (docs/benchmarks-history.md, "Engine, several ranks on one H200").
constexpr int kCallsPerSample = 20;
constexpr int kSamples = 15;
const std::size_t kSizes[] = {1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20};

struct Options {
  std::vector<int> ranks = {2, 3, 4, 5, 6, 7, 8};
  std::vector<Algorithm> kernels = {Algorithm::OneShotPush, Algorithm::TwoShotPush, Algorithm::OneStage,
                                    Algorithm::TwoStage};
  ElementType type = ElementType::BFloat16;
  bool pdl = true;
  int maxBlocks = 0;  // 0: as many as fit on the GPU for the world size
  bool markdown = false;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

class Bench {
 public:
  Bench(RankGroup& group, std::size_t bytes, ElementType type) : group_(group), type_(type), info_(typeInfoOf(type)) {
    count_ = bytes / elementBytes(type);
    const int ranks = group.ranks();
    for (int r = 0; r < ranks; ++r) {
      for (int i = 0; i < 2; ++i) in_[i].push_back(deviceMemory(bytes));
      out_.push_back(deviceMemory(bytes));
      inputs_.push_back(upload(patternTable(info_, ncclSum, r, ranks)));
      cudaEvent_t event;
      CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      joins_.push_back(event);
    }
    expectedTable_ = patternTable(info_, ncclSum, -1, ranks);
    expected_ = upload(expectedTable_);
    wrong_ = static_cast<unsigned long long*>(deviceMemory(sizeof(unsigned long long)));
    CHECK_CUDA(cudaEventCreate(&start_));
    CHECK_CUDA(cudaEventCreate(&stop_));
  }
  ~Bench() {
    for (void* p : memory_) cudaFree(p);
    for (cudaEvent_t e : joins_) cudaEventDestroy(e);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  // Whether the check counts errors planted in an output: a check that cannot fail would
  // pass every row.
  bool checkSeesErrors() {
    unsigned long long seen = 0;
    const std::size_t planted = plantErrorsAndCount(out_[0], count_, expected_, expectedTable_.data(), 3, true, wrong_,
                                                    group_.stream(0), &seen);
    return planted > 0 && seen == planted;
  }

  // The wrong elements of the last eagerMicros or graphMicros, over every rank and sample.
  unsigned long long wrong() const { return wrongSeen_; }

  // Eager: kCallsPerSample calls of every rank between two events, all streams joined.
  // Also keeps the host's time to submit one rank's call (hostMicros).
  double eagerMicros() {
    writeInputs();
    CHECK_CUDA(cudaEventRecord(start_, group_.stream(0)));  // the inputs are written before any rank reads them
    fork(start_);
    issue(kCallsPerSample);  // warm-up
    join();
    startRow();
    std::vector<double> samples;
    std::vector<double> host;
    for (int s = 0; s < kSamples; ++s) {
      const unsigned long long seed = writeInputs();
      CHECK_CUDA(cudaEventRecord(start_, group_.stream(0)));
      fork(start_);
      const auto issued = std::chrono::steady_clock::now();
      issue(kCallsPerSample);
      host.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - issued).count() /
                     (kCallsPerSample * group_.ranks()));
      join();
      CHECK_CUDA(cudaEventRecord(stop_, group_.stream(0)));
      CHECK_CUDA(cudaEventSynchronize(stop_));
      samples.push_back(elapsedMicros() / kCallsPerSample);
      checkLastCall(seed);
    }
    endRow();
    hostMicros_ = median(host);
    return median(samples);
  }

  // The median host time of one rank's eager call through the launcher (TestRank::submit: plan, launch, count),
  // from the last eagerMicros: the library's launch path without the NCCL hook.
  double hostMicros() const { return hostMicros_; }

  // Graph: the same calls of all ranks captured once (fork/join over the rank streams)
  // and replayed; launch gaps between calls disappear.
  double graphMicros() {
    cudaStream_t origin = group_.stream(0);
    CHECK_CUDA(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
    CHECK_CUDA(cudaEventRecord(start_, origin));
    fork(start_);
    issue(kCallsPerSample);
    join();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CHECK_CUDA(cudaStreamEndCapture(origin, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    writeInputs();
    CHECK_CUDA(cudaGraphLaunch(exec, origin));  // warm-up
    startRow();
    std::vector<double> samples;
    for (int s = 0; s < kSamples; ++s) {
      const unsigned long long seed = writeInputs();
      CHECK_CUDA(cudaEventRecord(start_, origin));
      CHECK_CUDA(cudaGraphLaunch(exec, origin));
      CHECK_CUDA(cudaEventRecord(stop_, origin));
      CHECK_CUDA(cudaEventSynchronize(stop_));
      samples.push_back(elapsedMicros() / kCallsPerSample);
      checkLastCall(seed);
    }
    endRow();
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
    return median(samples);
  }

 private:
  static const bench::TypeInfo& typeInfoOf(ElementType type) {
    for (const bench::TypeInfo& info : bench::kTypes)
      if (std::strcmp(info.name, elementTypeName(type)) == 0) return info;
    std::fprintf(stderr, "no bench values for %s\n", elementTypeName(type));
    std::exit(2);
  }
  void* deviceMemory(std::size_t bytes) {
    void* pointer = nullptr;
    CHECK_CUDA(cudaMalloc(&pointer, std::max<std::size_t>(bytes, 1)));
    memory_.push_back(pointer);
    return pointer;
  }
  bench::Pattern upload(const std::vector<unsigned char>& table) {
    void* device = deviceMemory(table.size());
    CHECK_CUDA(cudaMemcpy(device, table.data(), table.size(), cudaMemcpyHostToDevice));
    return bench::Pattern{device, bench::valuePeriod(group_.ranks()), info_.bytes};
  }
  // Both inputs of every rank get new seeds, on stream 0 before the sample's first event (so
  // outside the timed part); returns the first seed.
  unsigned long long writeInputs() {
    const unsigned long long first = seed_;
    for (int r = 0; r < group_.ranks(); ++r)
      for (int i = 0; i < 2; ++i)
        CHECK_CUDA(bench::writePattern(in_[i][r], count_, inputs_[r], bench::Seed{nullptr, first + i}, group_.stream(0)));
    seed_ += 2;
    return first;
  }
  void startRow() { CHECK_CUDA(cudaMemsetAsync(wrong_, 0, sizeof(unsigned long long), group_.stream(0))); }
  // After the sample's last event: the last call read in_[(calls - 1) % 2].
  void checkLastCall(unsigned long long firstSeed) {
    const bench::Seed seed{nullptr, firstSeed + (kCallsPerSample - 1) % 2};
    for (int r = 0; r < group_.ranks(); ++r)
      CHECK_CUDA(bench::countMismatches(out_[r], count_, expected_, seed, true, wrong_, group_.stream(0)));
  }
  void endRow() {
    CHECK_CUDA(cudaMemcpyAsync(&wrongSeen_, wrong_, sizeof wrongSeen_, cudaMemcpyDeviceToHost, group_.stream(0)));
    CHECK_CUDA(cudaStreamSynchronize(group_.stream(0)));
  }
  void issue(int calls) {
    for (int c = 0; c < calls; ++c) {
      std::vector<const void*> send(in_[c % 2].begin(), in_[c % 2].end());
      std::string why;
      if (!group_.allReduce(send, out_, count_, type_, &why)) {
        std::fprintf(stderr, "all-reduce not launched: %s\n", why.c_str());
        std::exit(1);
      }
    }
  }
  void fork(cudaEvent_t event) {
    for (int r = 1; r < group_.ranks(); ++r) CHECK_CUDA(cudaStreamWaitEvent(group_.stream(r), event, 0));
  }
  void join() {
    for (int r = 1; r < group_.ranks(); ++r) {
      CHECK_CUDA(cudaEventRecord(joins_[r], group_.stream(r)));
      CHECK_CUDA(cudaStreamWaitEvent(group_.stream(0), joins_[r], 0));
    }
  }
  double elapsedMicros() {
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1000.0;
  }

  RankGroup& group_;
  double hostMicros_ = 0;
  ElementType type_;
  const bench::TypeInfo& info_;
  std::size_t count_ = 0;
  std::vector<void*> memory_;
  std::vector<void*> in_[2], out_;   // per rank
  std::vector<bench::Pattern> inputs_;  // per rank
  std::vector<unsigned char> expectedTable_;
  bench::Pattern expected_;
  unsigned long long* wrong_ = nullptr;
  unsigned long long wrongSeen_ = 0;
  unsigned long long seed_ = 0;
  std::vector<cudaEvent_t> joins_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

Options parseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--ranks" && i + 1 < argc) {
      options.ranks.clear();
      for (char* token = std::strtok(argv[++i], ","); token; token = std::strtok(nullptr, ",")) {
        const int n = std::atoi(token);
        if (!takesWorldSize(n)) {
          std::fprintf(stderr, "--ranks: %s is not in %d..%d\n", token, kMinRanks, kMaxRanks);
          std::exit(2);
        }
        options.ranks.push_back(n);
      }
    } else if (arg == "--type" && i + 1 < argc) {
      const std::string type = argv[++i];
      if (type == "bf16") options.type = ElementType::BFloat16;
      else if (type == "fp16") options.type = ElementType::Float16;
      else if (type == "fp32") options.type = ElementType::Float32;
      else {
        std::fprintf(stderr, "--type: expected bf16, fp16 or fp32\n");
        std::exit(2);
      }
    } else if (arg == "--kernels" && i + 1 < argc) {
      options.kernels.clear();
      for (char* token = std::strtok(argv[++i], ","); token; token = std::strtok(nullptr, ",")) {
        bool known = false;
        for (const AlgorithmSpec& row : kAlgorithms) {
          if (std::strcmp(token, row.name) == 0) {
            options.kernels.push_back(row.algorithm);
            known = true;
          }
        }
        if (!known) {
          std::fprintf(stderr, "--kernels: %s is not a kernel's name (kernels/algorithms.h)\n", token);
          std::exit(2);
        }
      }
    } else if (arg == "--pdl" && i + 1 < argc) {
      options.pdl = std::strcmp(argv[++i], "0") != 0;
    } else if (arg == "--max-blocks" && i + 1 < argc) {
      options.maxBlocks = std::atoi(argv[++i]);
    } else if (arg == "--markdown") {
      options.markdown = true;
    } else {
      std::fprintf(stderr,
                   "usage: car_bench [--ranks 2,4,8] [--type bf16|fp16|fp32] [--kernels 1shot,2shot,1stage,2stage] "
                   "[--pdl 0|1] [--max-blocks N] [--markdown]\n");
      std::exit(arg == "--help" || arg == "-h" ? 0 : 2);
    }
  }
  return options;
}

std::string sizeLabel(std::size_t bytes) {
  return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parseOptions(argc, argv);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);  // one hardware queue per rank stream
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("car_bench: no CUDA device on this machine, nothing to measure.\n"
                "Run it on a machine with an NVIDIA GPU (see README.md).\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, kDevice));
  std::printf("# car_bench on %s (%d SMs), %s, %d calls per sample, median of %d samples, PDL %s\n", prop.name,
              prop.multiProcessorCount, elementTypeName(options.type), kCallsPerSample, kSamples,
              options.pdl ? "on" : "off");
  std::printf("# several ranks on ONE GPU: this measures our kernels and barriers, not NVLink\n");
  std::printf("# calls back to back; every sample's inputs new, its last call's output checked on every rank "
              "(wrong: elements, all ranks and samples)\n");
  if (options.markdown) {
    std::printf("| ranks | blocks | kernel | size | eager us | eager, copy in kernel us | graph us | host us | wrong |\n"
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  } else {
    std::printf("%5s %6s %7s %8s %10s %13s %10s %8s %6s\n", "ranks", "blocks", "kernel", "size", "eager_us",
                "eager_ik_us", "graph_us", "host_us", "wrong");
  }
  bool checkerTested = false;
  unsigned long long wrongTotal = 0;
  for (int ranks : options.ranks) {
    for (Algorithm algorithm : options.kernels) {
      const bool push = isPush(algorithm);
      Config config;
      config.algorithm = algorithm;
      config.pdl = options.pdl;
      config.maxBlocks = coResidentBlockLimit(kDevice, ranks, options.pdl);
      if (options.maxBlocks > 0) config.maxBlocks = std::min(config.maxBlocks, options.maxBlocks);
      config.copyInKernelBytes = 0;
      RankGroup copyEngine(kDevice, ranks, config);
      config.copyInKernelBytes = kLargestMaxBytes;
      std::unique_ptr<RankGroup> copyInKernel = push ? nullptr : std::make_unique<RankGroup>(kDevice, ranks, config);
      const int blocks = push ? config.maxBlocks : std::min(config.maxBlocks, kMaxBlocks);
      for (std::size_t bytes : kSizes) {
        // A forced kernel that cannot run this size would time the default one instead.
        if (!canRun(algorithm, CommunicatorFacts{ranks, true, 0}, bytes, config,
                    wirePacksPerPack(options.type))) continue;
        Bench bench(copyEngine, bytes, options.type);
        if (!checkerTested && !bench.checkSeesErrors()) {
          std::printf("car_bench: the output check does not see errors planted in an output: nothing measured\n");
          return 1;
        }
        checkerTested = true;
        const double eager = bench.eagerMicros();
        unsigned long long wrong = bench.wrong();
        const double host = bench.hostMicros();
        const double graph = bench.graphMicros();  // a graph always uses the separate copy
        wrong += bench.wrong();
        double eagerInKernel = eager;
        if (!push) {
          Bench inKernel(*copyInKernel, bytes, options.type);
          eagerInKernel = inKernel.eagerMicros();
          wrong += inKernel.wrong();
        }
        wrongTotal += wrong;
        if (options.markdown) {
          std::printf("| %d | %d | %s | %s | %.1f | %.1f | %.2f | %.2f | %llu |\n", ranks, blocks,
                      algorithmName(algorithm), sizeLabel(bytes).c_str(), eager, eagerInKernel, graph, host, wrong);
        } else {
          std::printf("%5d %6d %7s %8s %10.1f %13.1f %10.2f %8.2f %6llu\n", ranks, blocks, algorithmName(algorithm),
                      sizeLabel(bytes).c_str(), eager, eagerInKernel, graph, host, wrong);
        }
        std::fflush(stdout);
      }
    }
  }
  if (wrongTotal > 0) std::printf("car_bench: %llu wrong element(s): see the wrong column\n", wrongTotal);
  return wrongTotal > 0 ? 1 : 0;
}
