// Run-time (element type, world size, algorithm) -> the template instance that runs it.
// An unsupported combination yields nullptr and cudaErrorInvalidValue: never a silent
// success that launched nothing.
#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch.cuh"
#include "driver_calls.h"
#include "lamport.cuh"

namespace car {
namespace {

static_assert(kInstantiatedMaxRanks == kMaxRanks, "CAR_INSTANTIATE_FOR_RANKS must list 2..kMaxRanks");
static_assert(kInstantiatedTypes == kElementTypeCount, "CAR_FOR_EACH_ELEMENT_TYPE must list every ElementType");

template <typename T, int kRanks>
CollectiveKernel kernelOf(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::OneStage: return oneStageKernelOf<T, kRanks>();
    case Algorithm::TwoStage: return twoStageKernelOf<T, kRanks>();
    case Algorithm::OneShotPush: return oneShotPushKernelOf<T, kRanks>();
    case Algorithm::TwoShotPush: return twoShotPushKernelOf<T, kRanks>();
    case Algorithm::AllGatherPush: return allGatherPushKernelOf<kRanks>();
    case Algorithm::ReduceScatterPush: return reduceScatterPushKernelOf<T, kRanks>();
    case Algorithm::kCount: break;
  }
  return nullptr;
}

template <typename T, int... kOffsets>
CollectiveKernel pickByRanks(Algorithm algorithm, int ranks, std::integer_sequence<int, kOffsets...>) {
  CollectiveKernel picked = nullptr;
  // Exactly one offset matches; the fold visits each world size once.
  ((ranks == kMinRanks + kOffsets ? (picked = kernelOf<T, kMinRanks + kOffsets>(algorithm)) : picked), ...);
  return picked;
}

template <typename T>
CollectiveKernel pickForType(Algorithm algorithm, int ranks) {
  return pickByRanks<T>(algorithm, ranks,
                        std::make_integer_sequence<int, kMaxRanks - kMinRanks + 1>{});
}

// The push kernels' wire format per type must be the one the host sized the areas for.
// And each entry must pair the enumerator with its own device type: size, wire format,
// signedness and the floating types checked one by one, so two swapped entries fail too.
template <ElementType kType, typename T>
constexpr bool deviceTypeMatches() {
  using E = ElementType;
  if (sizeof(T) != elementBytes(kType) || kWirePacksOf<T> != wirePacksPerPack(kType)) return false;
  switch (kType) {
    case E::Int8: case E::Int32: case E::Int64: return std::is_integral<T>::value && std::is_signed<T>::value;
    case E::UInt8: case E::UInt32: case E::UInt64: return std::is_integral<T>::value && std::is_unsigned<T>::value;
    case E::Float16: return std::is_same<T, __half>::value;
    case E::BFloat16: return std::is_same<T, __nv_bfloat16>::value;
    case E::Float32: return std::is_same<T, float>::value;
    case E::Float64: return std::is_same<T, double>::value;
    case E::Float8E4M3: return std::is_same<T, __nv_fp8_e4m3>::value;
    case E::Float8E5M2: return std::is_same<T, __nv_fp8_e5m2>::value;
    case E::kCount: break;
  }
  return false;
}
#define CAR_CHECK_TYPE(enumerator, T, unused) \
  static_assert(deviceTypeMatches<ElementType::enumerator, T>(), #enumerator " must hold " #T);
CAR_FOR_EACH_ELEMENT_TYPE(CAR_CHECK_TYPE, unused)
#undef CAR_CHECK_TYPE

CollectiveKernel pickKernel(ElementType type, Algorithm algorithm, int ranks) {
#define CAR_PICK_TYPE(enumerator, T, unused) \
  case ElementType::enumerator: return pickForType<T>(algorithm, ranks);
  switch (type) {
    CAR_FOR_EACH_ELEMENT_TYPE(CAR_PICK_TYPE, unused)
    case ElementType::kCount: break;
  }
#undef CAR_PICK_TYPE
  return nullptr;
}

// Every instance by (world size, type, algorithm), walked out once when the library loads:
// a launch indexes it.
using KernelsOfWorldSize = std::array<std::array<CollectiveKernel, kAlgorithmCount>, kElementTypeCount>;
using AllKernels = std::array<KernelsOfWorldSize, kMaxRanks - kMinRanks + 1>;

AllKernels tableAllKernels() {
  AllKernels all{};
  for (int ranks = kMinRanks; ranks <= kMaxRanks; ++ranks) {
    for (int t = 0; t < kElementTypeCount; ++t) {
      for (int a = 0; a < kAlgorithmCount; ++a) {
        all[ranks - kMinRanks][t][a] = pickKernel(static_cast<ElementType>(t), static_cast<Algorithm>(a), ranks);
      }
    }
  }
  return all;
}

const AllKernels kAllKernels = tableAllKernels();

CollectiveKernel kernelFor(ElementType type, Algorithm algorithm, int ranks) {
  const int t = static_cast<int>(type), a = static_cast<int>(algorithm);
  if (ranks < kMinRanks || ranks > kMaxRanks || t < 0 || t >= kElementTypeCount || a < 0 || a >= kAlgorithmCount) {
    return nullptr;
  }
  return kAllKernels[ranks - kMinRanks][t][a];
}

__global__ void presetSignalKernel(Signal* signal, FlagWord round) {
  for (int i = threadIdx.x; i < kMaxBlocks * kMaxRanks; i += blockDim.x) {
    const int block = i / kMaxRanks;
    const int lane = i % kMaxRanks;
    signal->roundOf[block][lane] = round;
    // Neither round + 1 nor round + 2, the next two values the flags will be waited on for.
    signal->arrived[0][block][lane] = round;
    signal->arrived[1][block][lane] = round;
  }
}

__global__ void fillSentinelKernel(Pack* packs, std::size_t count) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    packs[i] = sentinelPack();
  }
}

}  // namespace

cudaError_t launchCollectiveKernel(const LaunchArgs& args, cudaStream_t stream, const KernelTable* table,
                                  bool* throughDriver) {
  if (throughDriver != nullptr) *throughDriver = false;
  const int t = static_cast<int>(args.type), a = static_cast<int>(args.algorithm);
  const bool tabled = table != nullptr && table->ranks == args.ranks && t >= 0 && t < kElementTypeCount && a >= 0 &&
                      a < kAlgorithmCount;
  const auto kernel = tabled ? reinterpret_cast<CollectiveKernel>(table->kernels[t][a])
                             : kernelFor(args.type, args.algorithm, args.ranks);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  const LaunchShape shape = launchShapeOf(args);
  if (tabled && launchThroughDriver(table->functions[t][a], shape, args, stream)) {
    if (throughDriver != nullptr) *throughDriver = true;
    return cudaSuccess;
  }
  return launchGrid(kernel, shape, args, stream);
}

cudaError_t presetSignalRound(Signal* signal, std::uint32_t round, cudaStream_t stream) {
  return cudaLaunchKernel(reinterpret_cast<const void*>(&presetSignalKernel), dim3(1), dim3(256),
                          std::array<void*, 2>{&signal, &round}.data(), 0, stream);
}

cudaError_t fillWithSentinel(void* areas, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (areas == nullptr || bytes % kPackBytes != 0) return cudaErrorInvalidValue;
  Pack* packs = static_cast<Pack*>(areas);
  std::size_t count = bytes / kPackBytes;
  return cudaLaunchKernel(reinterpret_cast<const void*>(&fillSentinelKernel), dim3(256), dim3(256),
                          std::array<void*, 2>{&packs, &count}.data(), 0, stream);
}

cudaError_t loadKernels(int ranks, KernelTable* table) {
  std::vector<const void*> kernels = {reinterpret_cast<const void*>(&presetSignalKernel),
                                      reinterpret_cast<const void*>(&fillSentinelKernel)};
  for (const KernelsOfWorldSize& ofWorldSize : kAllKernels) {
    for (const auto& ofType : ofWorldSize) {
      for (const CollectiveKernel kernel : ofType) {
        if (kernel == nullptr) return cudaErrorInvalidValue;
        kernels.push_back(reinterpret_cast<const void*>(kernel));
      }
    }
  }
  for (const void* kernel : kernels) {
    cudaFuncAttributes attributes{};
    const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel);
    if (err != cudaSuccess) return err;
  }
  if (table == nullptr) return cudaSuccess;
  *table = KernelTable{};
  if (ranks < kMinRanks || ranks > kMaxRanks) return cudaErrorInvalidValue;
  table->ranks = ranks;
  for (int t = 0; t < kElementTypeCount; ++t) {
    for (int a = 0; a < kAlgorithmCount; ++a) {
      const void* kernel = reinterpret_cast<const void*>(kAllKernels[ranks - kMinRanks][t][a]);
      table->kernels[t][a] = kernel;
      table->functions[t][a] = driverFunctionOf(kernel);
    }
  }
  return cudaSuccess;
}

}  // namespace car
