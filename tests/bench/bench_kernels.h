// The benchmarks' own device work (car_nccl_bench, car_bench): fresh inputs for every call,
// the elementwise kernel of the model-like step, and the exact check of a call's output.
// Every kernel here is a plain launch, without programmatic dependent launch: the kernel
// before an all-reduce never lets it start early, as a GEMM or a norm in a model does not.
//
// A call's data is a periodic pattern (bench_values.h): element i of the call with seed s is
// table[(i + s) % period]. The seed is a device counter plus an offset, so that a graph
// replayed many times still gives every call new data: the step advances the counter.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace bench {

struct Pattern {
  const void* table = nullptr;  // device memory: `period` elements of `elementBytes` each
  unsigned period = 1;
  int elementBytes = 1;         // 1, 2, 4 or 8
};

// The seed of one call: *counter (device memory; none: 0) plus offset.
struct Seed {
  const unsigned long long* counter = nullptr;
  unsigned long long offset = 0;
};

// out[0..count) = the pattern of `seed`.
cudaError_t writePattern(void* out, std::size_t count, const Pattern& pattern, Seed seed, cudaStream_t stream);

// What follows an all-reduce in a model step: reads `consumed` (bytes, as a residual add
// would; the reads are kept by a sink that is written only on an unlikely value), then
// writes the next call's input, as writePattern.
cudaError_t consumeAndWritePattern(const void* consumed, std::size_t consumedBytes, unsigned* sink, void* out,
                                   std::size_t count, const Pattern& pattern, Seed seed, cudaStream_t stream);

// *counter += by: the next step's calls get new seeds.
cudaError_t advanceSeeds(unsigned long long* counter, unsigned long long by, cudaStream_t stream);

// Adds to *wrong the elements of out[0..count) whose bytes differ from the pattern of `seed`;
// with `floating`, +0 and -0 are equal (the only two encodings of one value in our inputs).
cudaError_t countMismatches(const void* out, std::size_t count, const Pattern& expected, Seed seed, bool floating,
                            unsigned long long* wrong, cudaStream_t stream);

// Writes the expected pattern of `seed` to out[0..count), plants errors (each element the
// bitwise complement of the right one: never equal to it, nor another zero) at the first,
// middle and last elements, and counts them with countMismatches. Returns the errors
// planted, and in *seen those counted: a check that cannot fail would pass every row.
// `table` is the host copy of expected.table. Synchronises `stream`.
std::size_t plantErrorsAndCount(void* out, std::size_t count, const Pattern& expected, const unsigned char* table,
                                unsigned long long seed, bool floating, unsigned long long* wrong,
                                cudaStream_t stream, unsigned long long* seen);

}  // namespace bench
