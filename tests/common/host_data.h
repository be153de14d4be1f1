// Host-side data for the GPU tests: random inputs of each element type, the fp64 reference
// sum, and the tolerance one fp32 accumulation plus one final rounding allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "all_reduce.h"

namespace car::testing {

// xorshift64*: fast enough to draw fresh inputs for every case.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next();
  double uniform(double lo, double hi);

 private:
  std::uint64_t state_;
};

// A buffer of `count` elements of `type` stored as raw bytes, as the GPU sees it.
struct HostBuffer {
  ElementType type;
  std::vector<std::uint8_t> bytes;
  std::size_t count() const { return bytes.size() / elementBytes(type); }
  double at(std::size_t i) const;
  void set(std::size_t i, double value);  // rounds to the element type
};

HostBuffer randomBuffer(ElementType type, std::size_t count, Random& random);

// Compares `out` with the fp64 sum of `inputs` element by element (NaN where the sum is NaN,
// the same infinity where it is infinite); returns the number of mismatches and describes
// the first one in *first.
std::size_t countMismatches(const std::vector<HostBuffer>& inputs, const HostBuffer& out,
                            std::string* first);

}  // namespace car::testing
