// car_nccl_bench's command line (tests/bench/nccl_bench.cc has the usage).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench_values.h"

namespace bench {

// The collectives the program can time. A size is always the whole message, as nccl-tests
// counts it: all-reduce's buffer, all-gather's output, reduce-scatter's input; rounded down
// to a whole number of elements per rank. One place per collective: its call
// (RankBench::collective), its buffers' layout (RankBench::sendOf, recvOf) and its expected
// output (RankBench::writeExpected, deviceCheck, hostChecked).
enum class Collective { AllReduce, AllGather, ReduceScatter };

// How the calls are placed, each a row of its own (docs/cli.md, "The modes"):
//   model:    per layer a cuBLAS GEMM, the all-reduce, an elementwise kernel; per call: the
//             step's time minus the same step without the all-reduces, over the layers
//   isolated: before each call a kernel writes its input; per call: minus the same kernels alone
//   chain:    calls back to back, inputs written beforehand: the form that flatters a kernel
//             that lets the next call start early (programmatic dependent launch)
enum class Mode { Model, Isolated, Chain };

// What surrounds each call: its own buffers, out of place, on the main stream (plain); in
// place (PyTorch's form); on a second stream joined by events (PyTorch's collective stream);
// after a large call (the small call pays for what the large one left behind).
enum class Workload { Plain, InPlace, TwoStreams, AfterLarge };

const char* collectiveName(Collective collective);  // as --collective takes it
const char* modeName(Mode mode);
const char* workloadName(Workload workload);

struct Gemm {
  int m = 16, n = 4096, k = 4096;  // tokens x hidden, times hidden x hidden, bf16
};

struct Options {
  int ranks = 0;        // 0: one per visible GPU
  bool oneGpu = false;  // every rank a process on GPU 0 (the rig: under MPS)
  Collective collective = Collective::AllReduce;
  const TypeInfo* type = &kTypes[7];  // bf16
  const OpInfo* op = &kOps[0];        // sum
  std::vector<std::size_t> sizes;     // bytes, before rounding down to whole elements
  std::vector<Mode> modes = {Mode::Model, Mode::Isolated};
  std::vector<Workload> workloads = {Workload::Plain};
  int layers = 4;
  Gemm gemm;
  int calls = 20;    // per sample, isolated and chain
  int samples = 15;
  std::size_t largeBytes = 8 << 20;  // after-large: the size of the call before each one timed
  bool symmetric = false;
  bool probe = false;  // one checked call per size, nothing timed (for NCCL's tuning log)
  // Before anything else: an all-gather of this many bytes per rank on a stream of its own, the
  // communicator's first collective, as our set-up's exchange is (0: none). With NCCL alone it
  // shows what that exchange alone does to NCCL's later calls.
  std::size_t firstAllGatherBytes = 0;
  // Another communicator of the same ranks first, with 50 small all-reduces on it (the library
  // takes them), kept to the end; the one timed is split from it. With the library and
  // NCCL_CAR_GPU_MEMORY_BYTES of one block, the other holds a set-up that succeeded (block,
  // mappings, boards, launcher) and the one timed has no room, so every call on it is NCCL's:
  // what a set-up keeps, parted from how a set-up communicator's calls go.
  bool setUpAnotherFirst = false;
  // The bench's own all-reduces (the barrier before each sample, the largest over the ranks)
  // through NCCL's pncclAllReduce, which the library does not hook: then they go over NCCL in
  // every arm, and the ranks start each sample as far apart as NCCL leaves them, with or
  // without the library. By default they are ncclAllReduce, as the program's calls are.
  bool ncclBarrier = false;
  // Isolated mode also times the CUDA floor of a call (call_floor.h) in place of each call, as
  // it times the call: the row "floor", beside "host".
  bool floor = false;
  // Isolated mode also times each call through the hook and through NCCL's own entry point
  // (pnccl*, never hooked) sample by sample in turn: the rows paired-hook and paired-direct.
  // For a call the library forwards, their per-sample difference is what the hook adds, with
  // everything else (process, communicator, set-up, barrier) the same.
  bool pairedDirect = false;
};

Options parseOptions(int argc, char** argv);

}  // namespace bench
