// The table of contents of kernels/: everything host code may call. Each __global__ kernel
// sits right above its getter in one_stage.cu, two_stage.cu, one_shot_push.cu,
// two_shot_push.cu, all_gather_push.cu and reduce_scatter_push.cu; dispatch.cu turns the
// run-time (type, world size, algorithm) into one of those template instances.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "algorithms.h"
#include "rank_signal.h"

namespace car {

// Every type NCCL 2.28 reduces. Floating types accumulate in fp32 (fp64 in fp64) and round
// once; integers wrap in their own width, as NCCL's do.
enum class ElementType {
  Int8,
  UInt8,
  Int32,
  UInt32,
  Int64,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Float8E4M3,
  Float8E5M2,
  kCount,
};

constexpr int kElementTypeCount = static_cast<int>(ElementType::kCount);

// NCCL's built-in reductions. Avg is the sum divided by the world size: integers divide
// the wrapped sum, truncating toward zero (as NCCL does); floating types divide the
// accumulated sum before the one rounding.
enum class ReduceOp { Sum, Prod, Min, Max, Avg, kCount };

constexpr int kReduceOpCount = static_cast<int>(ReduceOp::kCount);

constexpr int elementBytes(ElementType type) {
  switch (type) {
    case ElementType::Int8:
    case ElementType::UInt8:
    case ElementType::Float8E4M3:
    case ElementType::Float8E5M2: return 1;
    case ElementType::Float16:
    case ElementType::BFloat16: return 2;
    case ElementType::Int32:
    case ElementType::UInt32:
    case ElementType::Float32: return 4;
    case ElementType::Int64:
    case ElementType::UInt64:
    case ElementType::Float64: return 8;
    case ElementType::kCount: break;
  }
  return 0;
}

constexpr bool isFp8(ElementType type) {
  return type == ElementType::Float8E4M3 || type == ElementType::Float8E5M2;
}

constexpr bool isInteger(ElementType type) {
  switch (type) {
    case ElementType::Int8:
    case ElementType::UInt8:
    case ElementType::Int32:
    case ElementType::UInt32:
    case ElementType::Int64:
    case ElementType::UInt64: return true;
    default: return false;
  }
}

// Packs on the wire per 16-byte pack of data in the push kernels (kernels/lamport.cuh).
// fp8, fp16, bf16 and fp32 have a spare bit pattern (a -0.0 that is sent as +0.0) to mark
// "not arrived yet": one pack each. Integers and fp64 have none: each 32-bit word travels as
// two 16-bit halves, which never look like the mark, in two packs.
constexpr int wirePacksPerPack(ElementType type) {
  switch (type) {
    case ElementType::Float16:
    case ElementType::BFloat16:
    case ElementType::Float32:
    case ElementType::Float8E4M3:
    case ElementType::Float8E5M2: return 1;
    default: return 2;
  }
}

// Packs on the wire per pack of data for `algorithm`: a kernel that only copies (all-gather)
// sends every type split, so that its bits arrive unchanged (kernels/lamport.cuh).
constexpr int kCopyWirePacks = 2;
constexpr int wirePacksOf(Algorithm algorithm, ElementType type) {
  return specOf(algorithm).copiesBits ? kCopyWirePacks : wirePacksPerPack(type);
}

const char* elementTypeName(ElementType type);
const char* reduceOpName(ReduceOp op);

// Addresses of every rank's buffer block as seen from this rank (its own included), fixed
// at setup. Passed by value into the kernel, so a captured CUDA graph replays correctly.
struct PeerTable {
  Signal* signals[kMaxRanks];
  const void* staging[kMaxRanks];
  void* tmp[kMaxRanks];
  void* areas[kMaxRanks];  // area 0 of each rank; area a starts a * areaBytes further
};

// Everything a kernel needs, passed by value as its one argument.
struct LaunchArgs {
  PeerTable peers{};
  Signal* selfSignal = nullptr;      // == peers.signals[rank], in this rank's own mapping
  PushState* pushState = nullptr;    // this rank's, local
  std::size_t areaBytes = 0;         // bytes of one push area
  void* output = nullptr;            // caller's output, any alignment
  // The caller's input. Push kernels always read it themselves. Pull kernels: non-null, the
  // kernel copies it into this rank's staging itself (16-byte aligned, one launch instead of
  // copy + kernel); null, the caller has already copied it there. Ranks may differ in this.
  const void* input = nullptr;
  // Message size; a pull kernel copying input: a multiple of 16. All-gather: each rank's part
  // (the input; the output holds `ranks` of them); reduce-scatter: each rank's result (the
  // output; the input holds `ranks` of them).
  long long bytes = 0;
  long long packs = 0;               // packsOf(bytes)
  int rank = 0;
  int ranks = 0;                     // 2..kMaxRanks
  // Pull kernels: gridBlocks(packs, maxBlocks), the same on every rank (the barrier pairs
  // block b with block b). Push kernels: any grid; pushGridBlocks is the usual one.
  int blocks = 0;
  int threads = kThreadsPerBlock;    // pull kernels: always kThreadsPerBlock
  ElementType type = ElementType::Float32;
  ReduceOp op = ReduceOp::Sum;
  Algorithm algorithm = Algorithm::OneStage;
  // Programmatic dependent launch (sm_90 and newer): the kernel may be scheduled while the
  // previous kernel on the stream drains; it waits for it before touching memory.
  bool pdl = false;
  // Host-mapped word the spins poll; non-zero makes every kernel of this rank return
  // promptly (ncclCommAbort). May be null.
  const volatile std::uint32_t* abortFlag = nullptr;
};

// The kernels of one world size, resolved once at an engine's creation: each host stub (from
// the table dispatch.cu builds when the library loads) and, where the driver gives one, its
// CUfunction in that device's context, through which a launch goes straight to
// cuLaunchKernelEx (kernels/driver_calls.h says why). A function belongs to the context it
// was resolved in.
struct KernelTable {
  int ranks = 0;  // the world size the kernels are of
  const void* kernels[kElementTypeCount][kAlgorithmCount] = {};
  void* functions[kElementTypeCount][kAlgorithmCount] = {};
};

// Launches the kernel. The arguments are the caller's to get right, grid and sizes included:
// the engine fills them from the call's plan (plugin/policy.h), the one place that checks
// them. For a pull kernel without args.input the caller must have copied the input into this
// rank's staging first, on the same stream. With a table of args.ranks whose function is
// set, through the driver (*throughDriver then true); otherwise, or should the driver refuse
// (a stream of another context than the function's, say), through the runtime, whose error
// is then the one returned: this launch's own, or cudaErrorInvalidValue, launching nothing,
// for a combination there is no kernel for.
cudaError_t launchCollectiveKernel(const LaunchArgs& args, cudaStream_t stream, const KernelTable* table = nullptr,
                                  bool* throughDriver = nullptr);

// Loads every kernel of kernels/ into the current device's context now. With CUDA's lazy
// module loading, the first launch of a kernel would otherwise load it then, and loading
// waits for the device: a kernel already spinning there (ours, for a peer whose call comes
// from the same, now waiting, thread) would never end. Called at every engine's creation,
// before its first launch; after the first time it only confirms. With `table`, also fills
// it for world size `ranks`: the host stubs, and the functions resolved in the current
// context for the driver; one the driver cannot give stays null (that launch goes through
// the runtime).
cudaError_t loadKernels(int ranks = 0, KernelTable* table = nullptr);

// Writes `round` into every barrier counter and arrival flag of a fresh Signal, so tests can
// start just below the 32-bit wrap-around. Every rank must be given the same value.
cudaError_t presetSignalRound(Signal* signal, std::uint32_t round, cudaStream_t stream);

// Fills `bytes` bytes (a multiple of 16) at `areas` with the push kernels' "nothing arrived
// yet" sentinel. Done once when a block is allocated; the kernels keep it so afterwards.
cudaError_t fillWithSentinel(void* areas, std::size_t bytes, cudaStream_t stream);

}  // namespace car
