// The table of contents of kernels/: everything host code may call. Each __global__ kernel
// sits right above its launcher in one_stage.cu and two_stage.cu; dispatch.cu turns the
// run-time (type, world size, algorithm) into one of those template instances.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "rank_signal.h"

namespace car {

enum class ElementType { Float16, BFloat16, Float32 };
enum class Algorithm { OneStage, TwoStage };

const char* algorithmName(Algorithm algorithm);
const char* elementTypeName(ElementType type);
int elementBytes(ElementType type);

// Addresses of every rank's buffer block as seen from this rank (its own included), fixed
// at setup. Passed by value into the kernel, so a captured CUDA graph replays correctly.
struct PeerTable {
  Signal* signals[kMaxRanks];
  const void* staging[kMaxRanks];
  void* tmp[kMaxRanks];
};

struct LaunchArgs {
  PeerTable peers{};
  Signal* selfSignal = nullptr;      // == peers.signals[rank], in this rank's own mapping
  void* output = nullptr;            // caller's output, 16-byte aligned
  long long packs = 0;               // message size in 16-byte packs
  int rank = 0;
  int ranks = 0;                     // 2..kMaxRanks
  int blocks = 0;                    // gridBlocks(packs, maxBlocks), same on every rank
  ElementType type = ElementType::Float32;
  Algorithm algorithm = Algorithm::OneStage;
  // Host-mapped word the barrier polls while it spins; non-zero makes every kernel of this
  // rank return promptly (ncclCommAbort). May be null.
  const volatile std::uint32_t* abortFlag = nullptr;
  // The caller's input, 16-byte aligned, or null. Non-null: the kernel copies it into this
  // rank's staging itself (one launch instead of copy + kernel). Null: the caller has
  // already copied it there. Ranks of one call may differ in this.
  const void* input = nullptr;
};

// Launches the kernel. Without args.input the caller must have copied the input into this
// rank's staging first, on the same stream. Returns cudaErrorInvalidValue, launching
// nothing, for a combination there is no kernel for.
cudaError_t launchAllReduceKernel(const LaunchArgs& args, cudaStream_t stream);

// Writes `round` into every barrier counter and flag slot of a fresh Signal, so tests can
// start just below the 32-bit wrap-around. Every rank must be given the same value.
cudaError_t presetSignalRound(Signal* signal, std::uint32_t round, cudaStream_t stream);

}  // namespace car
