// The side-by-side benchmark program: drives the real NCCL's ncclAllReduce over the GPUs of
// this machine, one process per GPU (forked here, no MPI), and prints, per message size, the
// median microseconds of one call eager and replayed from a CUDA graph, and the host time to
// issue one eager call. Run it as is for NCCL alone, under LD_PRELOAD=libnccl-car.so for NCCL
// with nccl-car; --symmetric registers the buffers as NCCL symmetric windows (nccl-tests'
// -R 2). `tools/nccl-car bench` runs the configurations in alternation and prints the table.
// Every size is checked once before it is timed; at a wrong size every rank stops, after a
// '# wrong: <bytes> bytes, <n> element(s) ...' line.
//
// Every NCCL type and built-in op: --type takes the library's names (kernels/all_reduce.h) or
// nccl-tests' (-d), --op sum|prod|min|max|avg. The inputs keep every result exact in the type,
// and the check exact but for some averages (bench_values.h says which, and why).
// Sizes are in bytes: each size is rounded down to a whole number of elements (the row shows
// the bytes reduced, as nccl-tests does), and a size under one element is skipped.
//
//   car_nccl_bench [--gpus N] [--type NAME] [--op NAME] [--min-bytes B] [--max-bytes B]
//                  [--calls N] [--samples N] [--symmetric]
//
// Output: '#' lines, then CSV: bytes,eager_us,graph_us,host_us (each the largest over ranks);
// the exit status is non-zero after a wrong result or a failed call.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../e2e/unique_id_file.h"
#include "bench_values.h"

namespace {

using namespace bench;

int gRank = 0;

#define BENCH_CHECK(ok, what)                                                      \
  do {                                                                             \
    if (!(ok)) {                                                                   \
      std::fprintf(stderr, "car_nccl_bench rank %d: %s failed (line %d)\n", gRank, what, __LINE__); \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)
#define CUDA_OK(call) BENCH_CHECK((call) == cudaSuccess, #call)
#define NCCL_OK(call) BENCH_CHECK((call) == ncclSuccess, #call)

constexpr const char* kUsage =
    "usage: car_nccl_bench [--gpus N] [--type NAME] [--op NAME] [--min-bytes B] [--max-bytes B] "
    "[--calls N] [--samples N] [--symmetric]\n"
    "  --type  int8 uint8 int32 uint32 int64 uint64 fp16 bf16 fp32 fp64 fp8e4m3 fp8e5m2 (default bf16);\n"
    "          nccl-tests' names too: half bfloat16 float double f8e4m3 f8e5m2 (fp8 needs sm_90)\n"
    "  --op    sum prod min max avg (default sum)\n"
    "  sizes double from --min-bytes to --max-bytes (default 1K, 8M); each is rounded down to a whole\n"
    "  number of elements, the bytes reduced are printed, a size under one element is skipped\n";

struct Options {
  int gpus = 0;  // 0: every visible GPU
  const TypeInfo* type = &kTypes[7];  // bf16
  const OpInfo* op = &kOps[0];        // sum
  std::size_t minBytes = 1 << 10;
  std::size_t maxBytes = 8 << 20;
  int calls = 100;
  int samples = 7;
  bool symmetric = false;
};

std::size_t parseBytes(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (*end == 'K' || *end == 'k') value *= 1024;
  else if (*end == 'M' || *end == 'm') value *= 1024 * 1024;
  else if (*end == 'G' || *end == 'g') value *= 1024.0 * 1024 * 1024;
  return static_cast<std::size_t>(value);
}

[[noreturn]] void usage(const char* problem) {
  if (problem) std::fprintf(stderr, "car_nccl_bench: %s\n", problem);
  std::fputs(kUsage, problem ? stderr : stdout);
  std::exit(problem ? 2 : 0);
}

const TypeInfo* typeNamed(const std::string& name) {
  for (const TypeInfo& type : kTypes)
    if (name == type.name || name == type.testsName) return &type;
  usage(("--type: unknown type '" + name + "'").c_str());
}

const OpInfo* opNamed(const std::string& name) {
  for (const OpInfo& op : kOps)
    if (name == op.name) return &op;
  usage(("--op: unknown op '" + name + "'").c_str());
}

Options parseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--gpus" && hasValue) options.gpus = std::atoi(argv[++i]);
    else if (arg == "--min-bytes" && hasValue) options.minBytes = parseBytes(argv[++i]);
    else if (arg == "--max-bytes" && hasValue) options.maxBytes = parseBytes(argv[++i]);
    else if (arg == "--calls" && hasValue) options.calls = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--samples" && hasValue) options.samples = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--symmetric") options.symmetric = true;
    else if (arg == "--type" && hasValue) options.type = typeNamed(argv[++i]);
    else if (arg == "--op" && hasValue) options.op = opNamed(argv[++i]);
    else if (arg == "--help" || arg == "-h") usage(nullptr);
    else usage(("unknown option or missing value: " + arg).c_str());
  }
  if (options.minBytes == 0) usage("--min-bytes: must be at least 1");
  return options;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

class Rank {
 public:
  Rank(const Options& options, int rank, int ranks, const ncclUniqueId& id) : options_(options), rank_(rank), ranks_(ranks) {
    CUDA_OK(cudaSetDevice(rank));
    NCCL_OK(ncclCommInitRank(&comm_, ranks, id, rank));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&start_));
    CUDA_OK(cudaEventCreate(&stop_));
    send_ = allocate(options.maxBytes, &sendWindow_);
    recv_ = allocate(options.maxBytes, &recvWindow_);
    CUDA_OK(cudaMalloc(&scratch_, 64));
  }
  ~Rank() {
    release(send_, sendWindow_);
    release(recv_, recvWindow_);
    cudaFree(scratch_);
    ncclCommDestroy(comm_);
  }

  // Fills the input, runs one call of `count` elements and compares every element. Returns
  // the wrong elements of the worst rank, known to every rank: all stop together at a wrong
  // size, rather than the right ones waiting forever in a collective for a rank that left.
  double wrongElements(std::size_t count) {
    const TypeInfo& type = *options_.type;
    const ncclRedOp_t op = options_.op->op;
    const std::size_t bytes = count * type.bytes;
    std::vector<unsigned char> data(bytes);
    for (std::size_t i = 0; i < count; ++i) encode(type, inputValue(type, op, rank_, ranks_, i), &data[i * type.bytes]);
    // On our stream, not the legacy default one: stream_ does not wait for that stream, so a
    // plain cudaMemset could land after the all-reduce has written the output.
    CUDA_OK(cudaMemcpyAsync(send_, data.data(), bytes, cudaMemcpyHostToDevice, stream_));
    CUDA_OK(cudaMemsetAsync(recv_, 0xFF, bytes, stream_));
    NCCL_OK(ncclAllReduce(send_, recv_, count, type.type, op, comm_, stream_));
    CUDA_OK(cudaMemcpyAsync(data.data(), recv_, bytes, cudaMemcpyDeviceToHost, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
    const double allowed = tolerance(type, op, ranks_);
    double wrong = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const double got = decode(type, &data[i * type.bytes]);
      // Written so that a NaN counts as wrong.
      wrong += !(std::fabs(got - expectedValue(type, op, ranks_, i)) <= allowed);
    }
    return largestOverRanks({wrong})[0];
  }

  // Times eager and graph calls of a size that passed wrongElements.
  std::vector<double> measure(std::size_t count) {
    for (int i = 0; i < options_.calls; ++i) allReduce(count);  // warm-up
    std::vector<double> eager, host, graph;
    for (int s = 0; s < options_.samples; ++s) {
      barrier();
      CUDA_OK(cudaEventRecord(start_, stream_));
      const auto issued = std::chrono::steady_clock::now();
      for (int i = 0; i < options_.calls; ++i) allReduce(count);
      host.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - issued).count() /
                     options_.calls);
      CUDA_OK(cudaEventRecord(stop_, stream_));
      eager.push_back(elapsedMicros() / options_.calls);
    }
    cudaGraphExec_t exec = captureCalls(count);
    CUDA_OK(cudaGraphLaunch(exec, stream_));  // warm-up
    for (int s = 0; s < options_.samples; ++s) {
      barrier();
      CUDA_OK(cudaEventRecord(start_, stream_));
      CUDA_OK(cudaGraphLaunch(exec, stream_));
      CUDA_OK(cudaEventRecord(stop_, stream_));
      graph.push_back(elapsedMicros() / options_.calls);
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    return largestOverRanks({median(eager), median(graph), median(host)});
  }

 private:
  void* allocate(std::size_t bytes, ncclWindow_t* window) {
    void* pointer = nullptr;
    if (options_.symmetric) {
      NCCL_OK(ncclMemAlloc(&pointer, bytes));
      NCCL_OK(ncclCommWindowRegister(comm_, pointer, bytes, window, NCCL_WIN_COLL_SYMMETRIC));
    } else {
      CUDA_OK(cudaMalloc(&pointer, bytes));
    }
    return pointer;
  }
  void release(void* pointer, ncclWindow_t window) {
    if (options_.symmetric) {
      ncclCommWindowDeregister(comm_, window);
      ncclMemFree(pointer);
    } else {
      cudaFree(pointer);
    }
  }
  void allReduce(std::size_t count) {
    NCCL_OK(ncclAllReduce(send_, recv_, count, options_.type->type, options_.op->op, comm_, stream_));
  }
  // Every rank starts a sample together: a tiny all-reduce, then wait for it.
  void barrier() {
    NCCL_OK(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclMax, comm_, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
  }
  cudaGraphExec_t captureCalls(std::size_t count) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < options_.calls; ++i) allReduce(count);
    CUDA_OK(cudaStreamEndCapture(stream_, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphDestroy(graph));
    return exec;
  }
  double elapsedMicros() {
    CUDA_OK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1000.0;
  }
  std::vector<double> largestOverRanks(const std::vector<double>& values) {
    std::vector<float> mine(values.begin(), values.end());
    float* device = static_cast<float*>(scratch_);
    CUDA_OK(cudaMemcpy(device, mine.data(), mine.size() * sizeof(float), cudaMemcpyHostToDevice));
    NCCL_OK(ncclAllReduce(device, device, mine.size(), ncclFloat32, ncclMax, comm_, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
    CUDA_OK(cudaMemcpy(mine.data(), device, mine.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return {mine.begin(), mine.end()};
  }

  const Options& options_;
  int rank_;
  int ranks_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  void* scratch_ = nullptr;
  ncclWindow_t sendWindow_{}, recvWindow_{};
};

int runRank(const Options& options, int rank, int ranks, const std::string& idPath) {
  gRank = rank;
  ncclUniqueId id;
  BENCH_CHECK(shareUniqueIdThroughFile(rank, idPath, &id), "sharing the NCCL unique id");
  Rank self(options, rank, ranks, id);
  if (rank == 0) {
    int version = 0;
    ncclGetVersion(&version);
    std::printf("# car_nccl_bench: %d GPUs, one process each, NCCL %d, %s %s, %s buffers, %d calls per sample, "
                "median of %d samples, largest over ranks\n",
                ranks, version, options.type->name, options.op->name,
                options.symmetric ? "symmetric-window" : "cudaMalloc", options.calls, options.samples);
    std::printf("bytes,eager_us,graph_us,host_us\n");
    std::fflush(stdout);
  }
  const std::size_t elementBytes = options.type->bytes;
  for (std::size_t size = options.minBytes; size <= options.maxBytes; size *= 2) {
    const std::size_t count = size / elementBytes;  // rounded down; under one element: skipped
    if (count == 0) continue;
    const std::size_t bytes = count * elementBytes;
    const double wrong = self.wrongElements(count);
    if (wrong > 0) {
      if (rank == 0) {
        std::printf("# wrong: %zu bytes, %.0f element(s) differ on the worst rank\n", bytes, wrong);
        std::fflush(stdout);
      }
      return 2;
    }
    const std::vector<double> times = self.measure(count);
    if (rank == 0) {
      std::printf("%zu,%.2f,%.2f,%.2f\n", bytes, times[0], times[1], times[2]);
      std::fflush(stdout);
    }
  }
  return 0;
}

// The number of visible GPUs, asked in a child process: CUDA must not be initialised in a
// process that forks children which use CUDA themselves.
int countDevicesInChild() {
  const pid_t child = fork();
  if (child == 0) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    std::_Exit(std::min(devices, 100));
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parseOptions(argc, argv);
  const int devices = countDevicesInChild();
  if (devices < 2) {
    std::printf("car_nccl_bench: needs 2 or more GPUs (found %d); nothing measured\n", devices);
    return 0;
  }
  if (options.gpus == 0 || options.gpus > devices) options.gpus = devices;
  const std::string idPath = "/tmp/car_nccl_bench_id." + std::to_string(getpid());
  std::vector<pid_t> children;
  for (int rank = 0; rank < options.gpus; ++rank) {
    const pid_t child = fork();
    if (child == 0) std::_Exit(runRank(options, rank, options.gpus, idPath));
    children.push_back(child);
  }
  int failures = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  std::remove(idPath.c_str());
  if (failures != 0) std::fprintf(stderr, "car_nccl_bench: %d rank(s) failed\n", failures);
  return failures == 0 ? 0 : 1;
}
