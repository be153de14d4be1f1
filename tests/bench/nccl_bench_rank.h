// One rank of car_nccl_bench: its communicator, streams, buffers and cuBLAS handle, and the
// measurement of every mode and workload (nccl_bench_options.h) at one size.
//
// Every sample's inputs are new (bench_kernels.h: seeded per call, and per replay through a
// device counter the step advances), and the output of the last call of every timed sample
// is checked exactly before the next sample starts, on the device (countMismatches) or, for
// the averages whose check allows a few units in the last place, on the host.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "bench_kernels.h"
#include "call_floor.h"
#include "nccl_bench_options.h"

namespace bench {

// One printed row: its form (model-graph, model-eager, isolated-graph, isolated-eager,
// chain-graph, chain-eager, host, floor, paired-hook, paired-direct, probe), per-call
// microseconds (median over the samples of the largest over ranks), and how it was checked.
struct Row {
  std::string mode;
  Workload workload;
  std::size_t bytes;
  double us;               // < 0: not timed (probe)
  int checked;             // calls whose output was checked, on every rank
  double wrong;            // wrong elements summed over those calls, worst rank
  std::vector<double> samples;
};

class RankBench {
 public:
  RankBench(const Options& options, int rank, int ranks, int device, const ncclUniqueId& id);
  ~RankBench();
  RankBench(const RankBench&) = delete;
  RankBench& operator=(const RankBench&) = delete;

  // Plants errors in a known output and checks that the check counts them: a check that
  // cannot fail would make every row look right. Every rank; false: do not trust any row.
  bool checkerSeesErrors();
  // One eager call with fresh inputs, checked on the host (every element, with the
  // tolerance of bench_values.h): the row `probe`.
  Row probe(std::size_t count);
  // The rows of one mode and workload at `count` elements (none where the pair does not
  // apply: chain in place, after-large outside isolated).
  std::vector<Row> measure(Mode mode, Workload workload, std::size_t count);

 private:
  struct Plan {
    Mode mode;
    Workload workload;
    std::size_t count;
    int callsPerStep;
  };

  void* allocate(std::size_t bytes);      // a collective's buffer: a symmetric window with --symmetric
  void* deviceMemory(std::size_t bytes);  // anything else
  void allGatherFirst(std::size_t bytes);  // Options::firstAllGatherBytes
  void createCommunicators(const ncclUniqueId& id);  // comm_, and another_ with Options::setUpAnotherFirst
  Pattern upload(const std::vector<unsigned char>& table, const TypeInfo& type, int ranks);
  // `count` is always the whole message (nccl_bench_options.h), a multiple of the ranks but
  // for all-reduce; a rank's input and output are the parts of it its collective gives it.
  std::size_t inputCount(std::size_t count) const;
  std::size_t outputCount(std::size_t count) const;
  std::size_t rounded(std::size_t count) const;  // down to a whole number of elements per rank
  void collective(const void* send, void* recv, std::size_t count, bool twoStreams, double* hostMicros);
  // The right output of the call with seed `seed`, written; compared on the device (adds to
  // *wrong_); compared on the host (returns the wrong elements).
  void writeExpected(void* output, std::size_t count, unsigned long long seed);
  void deviceCheck(const void* output, std::size_t count, unsigned long long seed);
  void gemm();
  double issueStep(const Plan& plan, bool withCalls);  // returns the host time in the all-reduce calls
  double runStep(const Plan& plan, bool withCalls, cudaGraphExec_t exec);
  cudaGraphExec_t capture(const Plan& plan, bool withCalls);
  void writeFirstInput(const Plan& plan);
  void writeChainInputs(const Plan& plan);
  const void* sendOf(const Plan& plan, int call) const;
  void* recvOf(const Plan& plan, int call) const;
  void checkLastCall(const Plan& plan, unsigned long long sampleSeed);
  unsigned long long hostChecked(const void* output, std::size_t count, unsigned long long seed);
  std::vector<Row> timeForm(const Plan& plan, bool graph);
  Row timeFloor(const Plan& plan);
  std::vector<Row> timePaired(const Plan& plan);  // Options::pairedDirect
  void barrier();
  void reduceMax(void* buffer, std::size_t count, ncclDataType_t type);  // the bench's own all-reduce
  std::vector<double> largestOverRanks(const std::vector<double>& values);
  double elapsedMicros();

  const Options& options_;
  int rank_, ranks_;
  std::size_t maxCount_ = 0, largeCount_ = 0;
  ncclComm_t comm_ = nullptr;
  ncclComm_t another_ = nullptr;  // with --set-up-another-first
  cudaStream_t main_ = nullptr, side_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr, fork_ = nullptr, join_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<CallFloor> floor_;  // with --floor
  bool direct_ = false;               // collective() calls NCCL's own entry point (timePaired)
  struct Allocation {
    void* pointer;
    ncclWindow_t window;  // null where nothing was registered
    bool fromNccl;        // ncclMemAlloc, else cudaMalloc
  };
  std::vector<Allocation> allocations_;
  void* in_[2] = {};
  void* out_[2] = {};
  void* largeIn_ = nullptr;
  void* largeOut_ = nullptr;
  void* gemmA_ = nullptr;
  void* gemmB_ = nullptr;
  void* gemmC_ = nullptr;
  void* scratch_ = nullptr;          // barriers and largestOverRanks
  unsigned* sink_ = nullptr;
  unsigned long long* seedCounter_ = nullptr;  // device; seedBase_ mirrors it
  unsigned long long* wrong_ = nullptr;        // device: the mismatches of the current row
  unsigned long long seedBase_ = 0;
  unsigned long long hostWrong_ = 0;           // the host's share of the current row's mismatches
  Pattern input_, expected_;
  std::vector<Pattern> inputOfRank_;           // all-gather: what each rank's block must hold
  bool checkOnHost_ = false;                   // a tolerance: the device check is bytewise
  bool floating_ = false;
};

}  // namespace bench
