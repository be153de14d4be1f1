// car_nccl_bench's types, ops and data (tests/bench/nccl_bench.cc), apart so that the CPU tests
// can check that every input and result is exact in its type (tests/cpu/test_bench_values.cc).
//
// The inputs are small integers chosen per op (-1, 0, 1 for fp8 sums and averages; at most
// one factor 2 per product; pairs of ranks that cancel around the average), so that every
// partial result, in whatever order NCCL combines the ranks, is exact in the type. The check
// is then exact, except for avg of a floating type over a rank count that is not a power of
// two: 1/ranks is not exact there (NCCL multiplies each input by it), so a result within
// `ranks` units in the last place of the largest input passes.
//
// Every call gets inputs of its own: the call with seed s reads element i's value at index
// i + s, so consecutive calls (and graph replays, which advance the seed) differ, and a
// result computed from the previous call's data is caught. Every pattern repeats after
// valuePeriod(ranks) elements, so a table of one period, on the device, is all a kernel
// needs to write any call's input or to check any call's output (bench_kernels.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

namespace bench {

enum class Kind { Signed, Unsigned, Float };

struct TypeInfo {
  const char* name;       // the library's name (elementTypeName)
  const char* testsName;  // nccl-tests' -d name
  ncclDataType_t type;
  int bytes;
  Kind kind;
  int mantissaBits;       // floating types: the bits after the binary point
};

inline constexpr TypeInfo kTypes[] = {
    {"int8", "int8", ncclInt8, 1, Kind::Signed, 0},
    {"uint8", "uint8", ncclUint8, 1, Kind::Unsigned, 0},
    {"int32", "int32", ncclInt32, 4, Kind::Signed, 0},
    {"uint32", "uint32", ncclUint32, 4, Kind::Unsigned, 0},
    {"int64", "int64", ncclInt64, 8, Kind::Signed, 0},
    {"uint64", "uint64", ncclUint64, 8, Kind::Unsigned, 0},
    {"fp16", "half", ncclFloat16, 2, Kind::Float, 10},
    {"bf16", "bfloat16", ncclBfloat16, 2, Kind::Float, 7},
    {"fp32", "float", ncclFloat32, 4, Kind::Float, 23},
    {"fp64", "double", ncclFloat64, 8, Kind::Float, 52},
    {"fp8e4m3", "f8e4m3", ncclFloat8e4m3, 1, Kind::Float, 3},
    {"fp8e5m2", "f8e5m2", ncclFloat8e5m2, 1, Kind::Float, 2},
};

struct OpInfo {
  const char* name;
  ncclRedOp_t op;
};

inline constexpr OpInfo kOps[] = {{"sum", ncclSum}, {"prod", ncclProd}, {"min", ncclMin}, {"max", ncclMax}, {"avg", ncclAvg}};

inline bool isFp8(const TypeInfo& type) { return type.kind == Kind::Float && type.bytes == 1; }

// What `rank` of `ranks` contributes at element i: small integers, so that every partial
// result of the op, in whatever order NCCL combines the ranks, is exact in the type.
inline double inputValue(const TypeInfo& type, ncclRedOp_t op, int rank, int ranks, std::size_t i) {
  const bool isUnsigned = type.kind == Kind::Unsigned;
  if (op == ncclProd) {
    // A 2 from one rank at most (none at some elements), else 1 or -1: the product is 1, 2, -1 or -2.
    if (static_cast<std::size_t>(rank) == i % (ranks + 1)) return 2;
    return !isUnsigned && (i * 7 + rank * 3) % 5 == 0 ? -1 : 1;
  }
  if (op == ncclAvg) {
    // Ranks r and ranks-1-r hold base+k and base-k (the middle rank base): the sum is
    // ranks*base, the average base exactly. fp8: every value -1, 0 or 1, so that the inputs
    // divided by a power of two and their partial sums stay exact with 2 mantissa bits.
    const int partner = ranks - 1 - rank;
    const int sign = rank < partner ? 1 : rank > partner ? -1 : 0;
    const std::size_t lower = static_cast<std::size_t>(std::min(rank, partner));
    int base = 0, k = 0;
    if (isFp8(type)) {
      const int pattern = static_cast<int>(i % 4);
      base = pattern == 0 ? 1 : pattern == 1 ? -1 : 0;
      k = pattern == 2 ? static_cast<int>((i / 4 + lower) % 2) : 0;
    } else {
      base = static_cast<int>(i * 7 % 5) - 2 + (isUnsigned ? 4 : 0);
      k = static_cast<int>((i + lower) % 3);
    }
    return base + sign * k;
  }
  // sum, min, max: -4..4 (unsigned 0..8); fp8 sums -1..1, whose partial sums over 8 ranks stay
  // within the integers fp8e5m2 holds exactly. Rank 0's fp8 sum inputs are shifted by i / 3:
  // over 3 or 6 ranks the others alone would sum to 0 everywhere, at every seed.
  const bool fp8Sum = isFp8(type) && op == ncclSum;
  const int spread = fp8Sum ? 1 : 4;
  const std::size_t shift = fp8Sum && rank == 0 ? i / 3 : 0;
  const int value = static_cast<int>((i * 7 + rank * 5 + shift) % (2 * spread + 1));
  return isUnsigned ? value : value - spread;
}

// The exact result at element i, in double (every value involved is a small integer or, for
// avg, an integer average).
inline double expectedValue(const TypeInfo& type, ncclRedOp_t op, int ranks, std::size_t i) {
  double result = inputValue(type, op, 0, ranks, i);
  for (int rank = 1; rank < ranks; ++rank) {
    const double value = inputValue(type, op, rank, ranks, i);
    if (op == ncclProd) result *= value;
    else if (op == ncclMin) result = std::min(result, value);
    else if (op == ncclMax) result = std::max(result, value);
    else result += value;
  }
  return op == ncclAvg ? result / ranks : result;
}

// How far a result may be from expectedValue: 0 but for avg of a floating type over a rank
// count that is not a power of two, where each input times 1/ranks is rounded: then `ranks`
// units in the last place of the largest input (4, fp8's 1).
inline double tolerance(const TypeInfo& type, ncclRedOp_t op, int ranks) {
  if (op != ncclAvg || type.kind != Kind::Float || (ranks & (ranks - 1)) == 0) return 0;
  return ranks * std::ldexp(1.0, (isFp8(type) ? 0 : 2) - type.mantissaBits);
}

// The length after which inputValue and expectedValue repeat, for every type and op: their
// indices enter only through i % 9 (sum, min, max; fp8 sums also (i / 3) % 3), i % 5 and
// i % (ranks + 1) (prod), i % 5 and i % 3 (avg), i % 4 and (i / 4) % 2 (fp8 avg); 360 is a
// multiple of 9, 5, 3 and 8.
inline unsigned valuePeriod(int ranks) { return std::lcm(360u, static_cast<unsigned>(ranks) + 1); }

template <typename T>
inline void store(T value, unsigned char* out) {
  std::memcpy(out, &value, sizeof value);
}

template <typename T>
inline T load(const unsigned char* in) {
  T value;
  std::memcpy(&value, in, sizeof value);
  return value;
}

// One element in the type's bytes; `value` is exactly representable.
inline void encode(const TypeInfo& type, double value, unsigned char* out) {
  const auto integer = static_cast<std::int64_t>(value);
  switch (type.type) {
    case ncclInt8: return store(static_cast<std::int8_t>(integer), out);
    case ncclUint8: return store(static_cast<std::uint8_t>(integer), out);
    case ncclInt32: return store(static_cast<std::int32_t>(integer), out);
    case ncclUint32: return store(static_cast<std::uint32_t>(integer), out);
    case ncclInt64: return store(integer, out);
    case ncclUint64: return store(static_cast<std::uint64_t>(integer), out);
    case ncclFloat16: return store(__float2half(static_cast<float>(value)), out);
    case ncclBfloat16: return store(__float2bfloat16(static_cast<float>(value)), out);
    case ncclFloat32: return store(static_cast<float>(value), out);
    case ncclFloat64: return store(value, out);
    case ncclFloat8e4m3: return store(__nv_fp8_e4m3(static_cast<float>(value)), out);
    case ncclFloat8e5m2: return store(__nv_fp8_e5m2(static_cast<float>(value)), out);
    default: std::abort();  // every type is one of kTypes
  }
}

inline double decode(const TypeInfo& type, const unsigned char* in) {
  switch (type.type) {
    case ncclInt8: return load<std::int8_t>(in);
    case ncclUint8: return load<std::uint8_t>(in);
    case ncclInt32: return load<std::int32_t>(in);
    case ncclUint32: return load<std::uint32_t>(in);
    case ncclInt64: return static_cast<double>(load<std::int64_t>(in));
    case ncclUint64: return static_cast<double>(load<std::uint64_t>(in));
    case ncclFloat16: return __half2float(load<__half>(in));
    case ncclBfloat16: return __bfloat162float(load<__nv_bfloat16>(in));
    case ncclFloat32: return load<float>(in);
    case ncclFloat64: return load<double>(in);
    case ncclFloat8e4m3: return static_cast<float>(load<__nv_fp8_e4m3>(in));
    case ncclFloat8e5m2: return static_cast<float>(load<__nv_fp8_e5m2>(in));
    default: std::abort();
  }
}

// One period of `rank`'s inputs (rank >= 0) or of the expected results (rank < 0), encoded in
// the type: element j is the value at index j. A call with seed s reads element i at
// (i + s) % period.
inline std::vector<unsigned char> patternTable(const TypeInfo& type, ncclRedOp_t op, int rank, int ranks) {
  const unsigned period = valuePeriod(ranks);
  std::vector<unsigned char> table(static_cast<std::size_t>(period) * type.bytes);
  for (unsigned j = 0; j < period; ++j) {
    const double value = rank >= 0 ? inputValue(type, op, rank, ranks, j) : expectedValue(type, op, ranks, j);
    encode(type, value, &table[static_cast<std::size_t>(j) * type.bytes]);
  }
  return table;
}

// The elements of `output` (count elements of the call with seed `seed`) farther from the
// expected result than tolerance() allows. Written so that a NaN counts as wrong.
inline std::size_t wrongElements(const TypeInfo& type, ncclRedOp_t op, int ranks, unsigned long long seed,
                                 const unsigned char* output, std::size_t count) {
  const unsigned period = valuePeriod(ranks);
  const double allowed = tolerance(type, op, ranks);
  std::vector<double> expected(period);
  for (unsigned j = 0; j < period; ++j) expected[j] = expectedValue(type, op, ranks, j);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double got = decode(type, &output[i * type.bytes]);
    wrong += !(std::fabs(got - expected[(i + seed) % period]) <= allowed);
  }
  return wrong;
}

// The elements of `output` (count elements) that differ from `rank`'s input of the call with
// seed `seed`: an all-gather's block of that rank, which must arrive exactly as it was sent.
inline std::size_t wrongCopies(const TypeInfo& type, ncclRedOp_t op, int rank, int ranks, unsigned long long seed,
                               const unsigned char* output, std::size_t count) {
  const unsigned period = valuePeriod(ranks);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double got = decode(type, &output[i * type.bytes]);
    wrong += !(got == inputValue(type, op, rank, ranks, (i + seed) % period));
  }
  return wrong;
}

}  // namespace bench
