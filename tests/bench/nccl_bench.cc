// The side-by-side benchmark program: drives ncclAllReduce (or, with --collective,
// ncclAllGather or ncclReduceScatter) through the real NCCL, one process per rank (forked
// here, no MPI), and prints per mode, workload and size the microseconds per call, checked. Run it as is for NCCL alone, under
// LD_PRELOAD=libnccl-car.so for NCCL with nccl-car; `tools/nccl-car bench` runs the
// configurations in alternation and prints the table (docs/cli.md).
//
// The modes (nccl_bench_options.h): model-like (per layer a cuBLAS GEMM, the all-reduce, an
// elementwise kernel, as a graph and eager; per call, the step minus the same step without
// the all-reduces, over the layers), isolated (a plain kernel writes each call's input),
// chain (calls back to back, the old form, which flatters programmatic dependent launch).
// The isolated eager calls also give the host time to issue one call. Workloads: plain, in
// place, on a second stream, after a large call.
//
// Everything timed is checked: every call's input is new (seeded per call and per replay),
// and the output of the last call of every timed sample is compared exactly with the
// expected result (bench_values.h) before the next sample; before any of it, a check that
// does not see planted errors stops the program. Each size starts with a probe: one call
// checked on the host.
//
// --ranks N: N processes on N GPUs; with --one-gpu all on GPU 0, for the one-GPU rig
// (docs/design.md, "Testing without a multi-GPU machine"): run it under MPS. Each rank then
// gets its own NCCL_HOSTID (NCCL refuses two ranks of one host on one GPU), NCCL over
// loopback sockets unless NCCL_SOCKET_IFNAME says otherwise, no CUDA_DEVICE_MAX_CONNECTIONS
// (MPS clients share one pool of queues), and NCCL_CAR_MAX_BLOCKS, unless set, such that
// every rank's blocks are resident at once with room for a second grid (PDL).
//
// Output: '#' lines, then CSV rows
//   mode,workload,bytes,us,checked,wrong,samples_us
// mode: model-graph model-eager isolated-graph isolated-eager host chain-graph chain-eager
// probe; us: the median over samples (empty for probe); checked: the calls whose output was
// checked on every rank; wrong: their wrong elements, summed, on the worst rank; samples_us:
// each sample's figure, ';'-separated. Exit status 2 after a wrong result, 1 on a failure.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../e2e/unique_id_file.h"
#include "nccl_bench_check.h"
#include "nccl_bench_options.h"
#include "nccl_bench_rank.h"

namespace {

using namespace bench;

// Blocks a pull kernel of ours uses at most; the rig gives no rank more (as the e2e runner's rig_blocks).
constexpr int kRigBlockCap = 36;

void printRow(const Row& row) {
  std::string samples;
  for (double value : row.samples) {
    char text[32];
    std::snprintf(text, sizeof text, "%s%.3f", samples.empty() ? "" : ";", value);
    samples += text;
  }
  char us[32] = "";
  if (row.us >= 0) std::snprintf(us, sizeof us, "%.3f", row.us);
  std::printf("%s,%s,%zu,%s,%d,%.0f,%s\n", row.mode.c_str(), workloadName(row.workload), row.bytes, us, row.checked,
              row.wrong, samples.c_str());
  std::fflush(stdout);
}

void printHeader(const Options& options, int ranks, int gpus) {
  int version = 0;
  ncclGetVersion(&version);
  const bool reduces = options.collective != Collective::AllGather;
  std::printf("# car_nccl_bench: %d ranks, one process each, on %s, NCCL %d, %s, %s%s%s, %s buffers; bytes: the "
              "whole message\n",
              ranks, options.oneGpu ? "GPU 0 (the one-GPU rig: under MPS)" : (std::to_string(gpus) + " GPUs").c_str(),
              version, collectiveName(options.collective), options.type->name, reduces ? " " : "",
              reduces ? options.op->name : "", options.symmetric ? "symmetric-window" : "cudaMalloc");
  if (options.probe) {
    std::printf("# probe: one call per size, checked on the host; nothing timed\n");
  } else {
    std::printf("# model: %d layers of a %dx%dx%d bf16 GEMM, the collective, an elementwise kernel; isolated and "
                "chain: %d calls; after-large: a %zu-byte call before each; %d samples per row, each the largest "
                "over ranks; the last call of every timed sample checked\n",
                options.layers, options.gemm.m, options.gemm.n, options.gemm.k, options.calls, options.largeBytes,
                options.samples);
  }
  if (options.oneGpu) {
    const char* blocks = std::getenv("NCCL_CAR_MAX_BLOCKS");
    std::printf("# one GPU: NCCL_HOSTID per rank, NCCL_SOCKET_IFNAME=%s, NCCL_CAR_MAX_BLOCKS=%s\n",
                std::getenv("NCCL_SOCKET_IFNAME"), blocks ? blocks : "(library default)");
  }
  std::printf("mode,workload,bytes,us,checked,wrong,samples_us\n");
  std::fflush(stdout);
}

// The rig's per-rank environment, set in the rank's process before its first CUDA or NCCL
// call (NCCL and the library read it then).
void setUpOneGpuRank(int rank, int ranks) {
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  setenv("NCCL_HOSTID", ("car-nccl-bench-" + std::to_string(getppid()) + "-rank-" + std::to_string(rank)).c_str(), 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  if (std::getenv("NCCL_CAR_MAX_BLOCKS") == nullptr) {
    int multiprocessors = 0;
    CUDA_OK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0));
    const int blocks = std::max(1, std::min(kRigBlockCap, multiprocessors / (2 * ranks)));
    setenv("NCCL_CAR_MAX_BLOCKS", std::to_string(blocks).c_str(), 1);
  }
}

int runRank(const Options& options, int rank, int ranks, int gpus, const std::string& idPath) {
  gBenchRank = rank;
  if (options.oneGpu) setUpOneGpuRank(rank, ranks);
  ncclUniqueId id;
  BENCH_CHECK(shareUniqueIdThroughFile(rank, idPath, &id), "sharing the NCCL unique id");
  RankBench self(options, rank, ranks, options.oneGpu ? 0 : rank, id);
  if (!self.checkerSeesErrors()) {
    if (rank == 0) std::printf("# the output check does not see errors planted in an output: nothing measured\n");
    return 2;
  }
  if (rank == 0) printHeader(options, ranks, gpus);
  bool wrong = false;
  for (std::size_t size : options.sizes) {
    std::size_t count = size / options.type->bytes;  // rounded down, per rank but for all-reduce
    if (options.collective != Collective::AllReduce) count -= count % ranks;
    if (count == 0) continue;  // under one element (per rank): skipped
    std::vector<Row> rows = {self.probe(count)};
    if (!options.probe) {
      for (Workload workload : options.workloads) {
        for (Mode mode : options.modes) {
          for (Row& row : self.measure(mode, workload, count)) rows.push_back(std::move(row));
        }
      }
    }
    for (const Row& row : rows) {
      wrong = wrong || row.wrong > 0;
      if (rank == 0) printRow(row);
    }
  }
  return wrong ? 2 : 0;
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
  if (options.oneGpu ? devices < 1 : devices < 2) {
    std::printf("car_nccl_bench: needs %s (found %d GPUs); nothing measured\n",
                options.oneGpu ? "a GPU" : "2 or more GPUs, or --one-gpu", devices);
    return 0;
  }
  if (options.oneGpu && options.ranks == 0) options.ranks = 2;
  if (!options.oneGpu && (options.ranks == 0 || options.ranks > devices)) options.ranks = devices;
  const int gpus = options.oneGpu ? 1 : options.ranks;
  const std::string idPath = "/tmp/car_nccl_bench_id." + std::to_string(getpid());
  std::vector<pid_t> children;
  for (int rank = 0; rank < options.ranks; ++rank) {
    const pid_t child = fork();
    if (child == 0) std::_Exit(runRank(options, rank, options.ranks, gpus, idPath));
    children.push_back(child);
  }
  int failures = 0, wrongRanks = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) ++wrongRanks;
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  std::remove(idPath.c_str());
  if (failures != 0) std::fprintf(stderr, "car_nccl_bench: %d rank(s) failed\n", failures);
  return failures != 0 ? 1 : wrongRanks != 0 ? 2 : 0;
}
