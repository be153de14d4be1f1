// 16-byte packs: the unit every thread loads, reduces and stores (one ld.128 / st.128).
// A pack holds 16 / sizeof(T) elements of any type. Each element is reduced in its
// accumulator type (fp32 for the floating types up to 32 bits, fp64 for fp64, the type
// itself for integers, which wrap as NCCL's do) and rounded back to T once, so the order of
// the operations is the only source of rounding. Every kernel adds the ranks in the order
// 0, 1, ..., n - 1 for every element: an element's result depends on its inputs alone, not
// on the message size, the kernel or the grid (docs/design.md, "One result per element").
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "all_reduce.h"

namespace car {

struct alignas(16) Pack {
  uint4 bits;
};

// How one element type is reduced: its accumulator, and the conversions to and from it.
template <typename T, typename Enable = void>
struct Arithmetic;

// Floating types of up to 32 bits (fp8, fp16, bf16, fp32): fp32 accumulation. The
// conversions back round to nearest even; fp8's (cuda_fp8.h) saturate to the largest finite
// value (__NV_SATFINITE).
template <typename T>
struct Arithmetic<T, std::enable_if_t<!std::is_integral<T>::value && !std::is_same<T, double>::value>> {
  using Accum = float;
  static __device__ __forceinline__ Accum widen(T v) { return static_cast<float>(v); }
  static __device__ __forceinline__ T narrow(Accum v) { return T(v); }
};
template <>
struct Arithmetic<double> {
  using Accum = double;
  static __device__ __forceinline__ Accum widen(double v) { return v; }
  static __device__ __forceinline__ double narrow(Accum v) { return v; }
};
// Integers: computed in the type itself, through its unsigned twin, so a sum or product
// wraps modulo 2^bits (the only defined overflow, and NCCL's result).
template <typename T>
struct Arithmetic<T, std::enable_if_t<std::is_integral<T>::value>> {
  using Accum = T;
  static __device__ __forceinline__ Accum widen(T v) { return v; }
  static __device__ __forceinline__ T narrow(Accum v) { return v; }
};

// fmin / fmax: a NaN loses to a number (NCCL's choice for floats too).
__device__ __forceinline__ float floatMin(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double floatMin(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ float floatMax(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double floatMax(double a, double b) { return fmax(a, b); }

// Every op is computed and the run-time one selected, with no branch: a branch on the op
// (a switch, or a chain of tests, which nvcc turns into one) compiles to an indirect jump
// through a table in constant memory: a dependent load between a pack's arrival and its
// reduction, on the critical path of every call (docs/benchmarks.md has its cost). The extra
// arithmetic is a few instructions per element, off that path.
template <typename A>
__device__ __forceinline__ A combine(ReduceOp op, A a, A b) {
  A sum, product, low, high;
  if constexpr (std::is_integral<A>::value) {
    using U = std::make_unsigned_t<A>;
    sum = static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    product = static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    low = b < a ? b : a;
    high = a < b ? b : a;
  } else {
    sum = a + b;
    product = a * b;
    low = floatMin(a, b);
    high = floatMax(a, b);
  }
  const A extreme = op == ReduceOp::Min ? low : high;
  const A other = op == ReduceOp::Prod ? product : extreme;
  return op == ReduceOp::Sum || op == ReduceOp::Avg ? sum : other;
}

// Avg divides the reduced sum by the world size: integers truncate toward zero.
template <typename A>
__device__ __forceinline__ A finish(ReduceOp op, A value, int ranks) {
  return op == ReduceOp::Avg ? value / static_cast<A>(ranks) : value;
}

template <typename T>
struct PackOf {
  static constexpr int kElems = 16 / sizeof(T);
  using Math = Arithmetic<T>;
  struct Accum {
    typename Math::Accum lane[kElems];
  };
};

// fp8 converts two elements per instruction on sm_89 and newer (cvt ... e4m3x2 / e5m2x2),
// where one at a time costs two conversions each way (fp8 <-> fp16 <-> fp32). The pair's
// first element is the low byte, as in memory. The results are the one-at-a-time ones:
// fp8 -> fp32 is exact, fp32 -> fp8 rounds to nearest even and saturates (__NV_SATFINITE,
// as the __nv_fp8_e4m3 / __nv_fp8_e5m2 constructors do).
template <typename T>
constexpr bool kIsFp8 = std::is_same<T, __nv_fp8_e4m3>::value || std::is_same<T, __nv_fp8_e5m2>::value;

template <typename T>
constexpr __nv_fp8_interpretation_t kFp8Kind = std::is_same<T, __nv_fp8_e4m3>::value ? __NV_E4M3 : __NV_E5M2;

__device__ __forceinline__ std::uint32_t packWord(const Pack& pack, int k) {
  return k == 0 ? pack.bits.x : k == 1 ? pack.bits.y : k == 2 ? pack.bits.z : pack.bits.w;
}

template <typename T>
__device__ __forceinline__ float2 widenFp8Pair(std::uint32_t pair) {
  const __half2_raw halves = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), kFp8Kind<T>);
  return __half22float2(__half2(halves));
}

template <typename T>
__device__ __forceinline__ std::uint32_t narrowFp8Pair(float low, float high) {
  return __nv_cvt_float2_to_fp8x2(make_float2(low, high), __NV_SATFINITE, kFp8Kind<T>);
}

template <typename T>
__device__ __forceinline__ void accumulate(typename PackOf<T>::Accum& sum, const Pack& pack, bool first,
                                           ReduceOp op) {
  if constexpr (kIsFp8<T>) {
#pragma unroll
    for (int i = 0; i < PackOf<T>::kElems; i += 2) {
      const float2 pair = widenFp8Pair<T>(packWord(pack, i / 4) >> (8 * (i % 4)) & 0xFFFFu);
      sum.lane[i] = first ? pair.x : combine(op, sum.lane[i], pair.x);
      sum.lane[i + 1] = first ? pair.y : combine(op, sum.lane[i + 1], pair.y);
    }
  } else {
    const T* elems = reinterpret_cast<const T*>(&pack.bits);
#pragma unroll
    for (int i = 0; i < PackOf<T>::kElems; ++i) {
      const auto value = PackOf<T>::Math::widen(elems[i]);
      sum.lane[i] = first ? value : combine(op, sum.lane[i], value);
    }
  }
}

// Every zero that a kernel returns in fp8, fp16, bf16 or fp32 is +0.0, so that every kernel
// returns the same bits (docs/design.md, "One result per element"): the push kernels send an
// input -0.0 as +0.0 (kernels/lamport.cuh) and the pull kernels do not, and through +, x, min,
// max and Avg's division the sign of an input zero reaches nothing but the sign of a zero
// result. fp64 and
// the integers travel unchanged in every kernel and keep what the arithmetic gives.
template <typename T>
constexpr bool kPositiveZeros = !std::is_integral<T>::value && !std::is_same<T, double>::value;

// The sign bit of each element of a 32-bit word of T.
template <typename T>
constexpr std::uint32_t kSignBitsOf = sizeof(T) == 4 ? 0x80000000u : sizeof(T) == 2 ? 0x80008000u : 0x80808080u;

// Clears the sign of each element of `word` whose other bits are all zero. Adding the
// all-ones magnitude to an element's magnitude sets its sign position exactly when the
// magnitude is non-zero, and never carries into the next element.
template <typename T>
__device__ __forceinline__ std::uint32_t withPositiveZeros(std::uint32_t word) {
  constexpr std::uint32_t kMagnitude = ~kSignBitsOf<T>;
  const std::uint32_t nonZero = (word & kMagnitude) + kMagnitude;
  return word & (nonZero | kMagnitude);
}

template <typename T>
__device__ __forceinline__ Pack roundToPack(const typename PackOf<T>::Accum& sum, ReduceOp op, int ranks) {
  Pack pack;
  if constexpr (kIsFp8<T>) {
    std::uint32_t words[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int i = 0; i < PackOf<T>::kElems; i += 2) {
      words[i / 4] |= narrowFp8Pair<T>(finish(op, sum.lane[i], ranks), finish(op, sum.lane[i + 1], ranks))
                      << (8 * (i % 4));
    }
    pack.bits = make_uint4(words[0], words[1], words[2], words[3]);
  } else {
    T* elems = reinterpret_cast<T*>(&pack.bits);
#pragma unroll
    for (int i = 0; i < PackOf<T>::kElems; ++i) elems[i] = PackOf<T>::Math::narrow(finish(op, sum.lane[i], ranks));
  }
  if constexpr (kPositiveZeros<T>) {
    pack.bits = make_uint4(withPositiveZeros<T>(pack.bits.x), withPositiveZeros<T>(pack.bits.y),
                           withPositiveZeros<T>(pack.bits.z), withPositiveZeros<T>(pack.bits.w));
  }
  return pack;
}

// Runs body(ReduceOp) with the op as a compile-time constant when it is Sum, the op nearly
// every call makes, and as the run-time value otherwise: two copies of the kernel body, one
// branch on entry. With the constant, the reduction is one add per element; the branchless
// any-op combine costs several. That matters because every warp of a block reduces at the
// same moment (the packs arrive together), so the extra instructions add to the call's time
// instead of hiding behind the wait (docs/benchmarks.md has the figures).
struct SumOp {
  __device__ constexpr operator ReduceOp() const { return ReduceOp::Sum; }
};

template <typename Body>
__device__ __forceinline__ void withSumSpecialized(ReduceOp op, Body body) {
  if (op == ReduceOp::Sum) {
    body(SumOp{});
  } else {
    body(op);
  }
}

// Reduction of pack `index` over `sources` in the order given, which every kernel makes the
// rank order. All loads are issued before the first operation (the loop is unrolled and the
// loads are independent), so the remote reads are in flight together.
template <typename T, int kRanks>
__device__ __forceinline__ Pack reducePacks(const Pack* const (&sources)[kRanks], long long index, ReduceOp op) {
  Pack loaded[kRanks];
#pragma unroll
  for (int r = 0; r < kRanks; ++r) loaded[r] = sources[r][index];
  typename PackOf<T>::Accum sum;
#pragma unroll
  for (int r = 0; r < kRanks; ++r) accumulate<T>(sum, loaded[r], r == 0, op);
  return roundToPack<T>(sum, op, kRanks);
}

}  // namespace car
