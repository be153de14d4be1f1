// Run-time (element type, world size, algorithm) -> the template instance that runs it.
// An unsupported combination yields nullptr and cudaErrorInvalidValue: never a silent
// success that launched nothing.
#include <utility>

#include "dispatch.cuh"
#include "geometry.h"

namespace car {
namespace {

constexpr int kMinRanks = 2;

template <typename T, int... kOffsets>
KernelLauncher pickByRanks(Algorithm algorithm, int ranks, std::integer_sequence<int, kOffsets...>) {
  KernelLauncher picked = nullptr;
  // Exactly one offset matches; the fold visits each world size once.
  ((ranks == kMinRanks + kOffsets
        ? (picked = algorithm == Algorithm::OneStage ? &launchOneStage<T, kMinRanks + kOffsets>
                                                     : &launchTwoStage<T, kMinRanks + kOffsets>)
        : picked),
   ...);
  return picked;
}

template <typename T>
KernelLauncher pickForType(Algorithm algorithm, int ranks) {
  return pickByRanks<T>(algorithm, ranks,
                        std::make_integer_sequence<int, kMaxRanks - kMinRanks + 1>{});
}

KernelLauncher pickLauncher(ElementType type, Algorithm algorithm, int ranks) {
  switch (type) {
    case ElementType::Float16: return pickForType<__half>(algorithm, ranks);
    case ElementType::BFloat16: return pickForType<__nv_bfloat16>(algorithm, ranks);
    case ElementType::Float32: return pickForType<float>(algorithm, ranks);
  }
  return nullptr;
}

__global__ void presetSignalKernel(Signal* signal, FlagWord round) {
  for (int i = threadIdx.x; i < kMaxBlocks * kMaxRanks; i += blockDim.x) {
    const int block = i / kMaxRanks;
    const int lane = i % kMaxRanks;
    signal->roundOf[block][lane] = round;
    // Neither round + 1 nor round + 2, the next two values the slots will be waited on for.
    signal->arrived[0][block][lane] = round;
    signal->arrived[1][block][lane] = round;
  }
}

}  // namespace

const char* algorithmName(Algorithm algorithm) {
  return algorithm == Algorithm::OneStage ? "1stage" : "2stage";
}

const char* elementTypeName(ElementType type) {
  switch (type) {
    case ElementType::Float16: return "fp16";
    case ElementType::BFloat16: return "bf16";
    case ElementType::Float32: return "fp32";
  }
  return "?";
}

int elementBytes(ElementType type) { return type == ElementType::Float32 ? 4 : 2; }

cudaError_t launchAllReduceKernel(const LaunchArgs& args, cudaStream_t stream) {
  if (args.blocks < 1 || args.blocks > kMaxBlocks || args.packs < 1 || args.rank < 0 ||
      args.rank >= args.ranks) {
    return cudaErrorInvalidValue;
  }
  KernelLauncher launcher = pickLauncher(args.type, args.algorithm, args.ranks);
  if (launcher == nullptr) return cudaErrorInvalidValue;
  return launcher(args, stream);
}

cudaError_t presetSignalRound(Signal* signal, std::uint32_t round, cudaStream_t stream) {
  presetSignalKernel<<<1, 256, 0, stream>>>(signal, round);
  return cudaGetLastError();
}

}  // namespace car
