#include "bench_kernels.h"

#include <algorithm>
#include <vector>

namespace bench {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxGrid = 1024;

unsigned gridFor(std::size_t items) {
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(kMaxGrid, (items + kThreads - 1) / kThreads)));
}

__device__ unsigned long long seedOf(Seed seed) { return (seed.counter ? *seed.counter : 0) + seed.offset; }

// Element i of the pattern lies at (i + seed) % period; the index moves by the stride modulo
// the period, so the loop needs no 64-bit division.
template <typename Word>
__device__ void fill(Word* out, std::size_t count, const Word* table, unsigned period, unsigned long long seed) {
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned j = static_cast<unsigned>((first + seed) % period);
  const unsigned step = static_cast<unsigned>(stride % period);
  for (std::size_t i = first; i < count; i += stride) {
    out[i] = table[j];
    j += step;
    if (j >= period) j -= period;
  }
}

template <typename Word>
__global__ void writePatternKernel(Word* out, std::size_t count, const Word* table, unsigned period, Seed seed) {
  fill(out, count, table, period, seedOf(seed));
}

template <typename Word>
__global__ void consumeKernel(const unsigned char* consumed, std::size_t consumedBytes, unsigned* sink, Word* out,
                              std::size_t count, const Word* table, unsigned period, Seed seed) {
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned folded = 0;
  const std::size_t words = consumedBytes / sizeof(unsigned);
  const auto* consumedWords = reinterpret_cast<const unsigned*>(consumed);
  for (std::size_t i = first; i < words; i += stride) folded ^= consumedWords[i] * 2654435761u;
  for (std::size_t i = words * sizeof(unsigned) + first; i < consumedBytes; i += stride) folded ^= consumed[i];
  if (folded == 0x9e3779b9u) *sink = folded;
  fill(out, count, table, period, seedOf(seed));
}

__global__ void advanceKernel(unsigned long long* counter, unsigned long long by) { *counter += by; }

template <typename Word>
__global__ void mismatchKernel(const Word* out, std::size_t count, const Word* table, unsigned period, Seed seed,
                               Word signBit, unsigned long long* wrong) {
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const unsigned long long s = seedOf(seed);
  unsigned j = static_cast<unsigned>((first + s) % period);
  const unsigned step = static_cast<unsigned>(stride % period);
  unsigned long long mine = 0;
  for (std::size_t i = first; i < count; i += stride) {
    const Word got = out[i], expected = table[j];
    const bool bothZero = signBit != 0 && static_cast<Word>((got | expected) & static_cast<Word>(~signBit)) == 0;
    mine += got != expected && !bothZero;
    j += step;
    if (j >= period) j -= period;
  }
  if (mine != 0) atomicAdd(wrong, mine);
}

template <typename Launch>
cudaError_t byElementSize(int elementBytes, Launch&& launch) {
  switch (elementBytes) {
    case 1: launch(std::uint8_t{}); break;
    case 2: launch(std::uint16_t{}); break;
    case 4: launch(std::uint32_t{}); break;
    case 8: launch(std::uint64_t{}); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t writePattern(void* out, std::size_t count, const Pattern& pattern, Seed seed, cudaStream_t stream) {
  return byElementSize(pattern.elementBytes, [&](auto word) {
    using Word = decltype(word);
    writePatternKernel<Word><<<gridFor(count), kThreads, 0, stream>>>(
        static_cast<Word*>(out), count, static_cast<const Word*>(pattern.table), pattern.period, seed);
  });
}

cudaError_t consumeAndWritePattern(const void* consumed, std::size_t consumedBytes, unsigned* sink, void* out,
                                   std::size_t count, const Pattern& pattern, Seed seed, cudaStream_t stream) {
  return byElementSize(pattern.elementBytes, [&](auto word) {
    using Word = decltype(word);
    consumeKernel<Word><<<gridFor(std::max(count, consumedBytes / sizeof(unsigned))), kThreads, 0, stream>>>(
        static_cast<const unsigned char*>(consumed), consumedBytes, sink, static_cast<Word*>(out), count,
        static_cast<const Word*>(pattern.table), pattern.period, seed);
  });
}

cudaError_t advanceSeeds(unsigned long long* counter, unsigned long long by, cudaStream_t stream) {
  advanceKernel<<<1, 1, 0, stream>>>(counter, by);
  return cudaGetLastError();
}

cudaError_t countMismatches(const void* out, std::size_t count, const Pattern& expected, Seed seed, bool floating,
                            unsigned long long* wrong, cudaStream_t stream) {
  return byElementSize(expected.elementBytes, [&](auto word) {
    using Word = decltype(word);
    const Word signBit = floating ? static_cast<Word>(Word{1} << (8 * sizeof(Word) - 1)) : Word{0};
    mismatchKernel<Word><<<gridFor(count), kThreads, 0, stream>>>(
        static_cast<const Word*>(out), count, static_cast<const Word*>(expected.table), expected.period, seed, signBit,
        wrong);
  });
}

std::size_t plantErrorsAndCount(void* out, std::size_t count, const Pattern& expected, const unsigned char* table,
                                unsigned long long seed, bool floating, unsigned long long* wrong,
                                cudaStream_t stream, unsigned long long* seen) {
  *seen = ~0ull;
  if (writePattern(out, count, expected, Seed{nullptr, seed}, stream) != cudaSuccess) return 0;
  const std::size_t bytes = expected.elementBytes;
  std::vector<std::size_t> places = {0, count / 2, count - 1};
  places.erase(std::unique(places.begin(), places.end()), places.end());  // a short output
  std::size_t planted = 0;
  for (std::size_t at : places) {
    std::vector<unsigned char> complement(bytes);
    for (std::size_t b = 0; b < bytes; ++b) complement[b] = static_cast<unsigned char>(~table[((at + seed) % expected.period) * bytes + b]);
    if (cudaMemcpyAsync(static_cast<unsigned char*>(out) + at * bytes, complement.data(), bytes, cudaMemcpyHostToDevice,
                        stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      return 0;
    }
    ++planted;
  }
  unsigned long long counted = 0;
  if (cudaMemsetAsync(wrong, 0, sizeof counted, stream) != cudaSuccess ||
      countMismatches(out, count, expected, Seed{nullptr, seed}, floating, wrong, stream) != cudaSuccess ||
      cudaMemcpyAsync(&counted, wrong, sizeof counted, cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess) {
    return 0;
  }
  *seen = counted;
  return planted;
}

}  // namespace bench
