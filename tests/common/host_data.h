// Host-side data for the GPU tests: buffers of every element type, random inputs chosen per
// (type, op), and the reference every kernel is checked against (tests/README.md, "The
// reference"):
//
// - Integers: Sum and Prod wrap in the type's width (two's complement, as unsigned
//   arithmetic does), Min and Max are exact, Avg is the wrapped sum (in the type) divided by
//   the world size, truncated toward zero (C++ integer division). Bit-exact.
// - fp16, bf16, fp32, fp8 e4m3, fp8 e5m2: accumulated in fp32 over the ranks (in an order the
//   contract leaves open), Min and Max as fminf/fmaxf, Avg the fp32 sum divided by the world
//   size, then rounded once to the type (to nearest, ties to even; fp8 saturating as
//   __NV_SATFINITE: results beyond the largest finite value, infinities included, become
//   that value, NaN stays NaN). fp64 accumulates in fp64. Checked against an fp64 reference
//   within what that accumulation and that one rounding allow (Expected::tolerance).
// - Zeros of either sign match each other (push kernels send -0.0 as +0.0); NaN must be NaN,
//   an infinity that very infinity.
// - Min and Max follow fminf/fmaxf: a NaN is ignored unless every rank's value is NaN; the
//   result is the very input picked, or zero where that is a subnormal of the accumulation.
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
  // Uniform in [0, n).
  std::uint64_t below(std::uint64_t n) { return next() % n; }

 private:
  std::uint64_t state_;
};

constexpr bool isSignedInteger(ElementType type) {
  return type == ElementType::Int8 || type == ElementType::Int32 || type == ElementType::Int64;
}

constexpr bool isFloating(ElementType type) { return !isInteger(type) && type != ElementType::kCount; }

constexpr ElementType kAllTypes[] = {
    ElementType::Int8,    ElementType::UInt8,    ElementType::Int32,   ElementType::UInt32,
    ElementType::Int64,   ElementType::UInt64,   ElementType::Float16, ElementType::BFloat16,
    ElementType::Float32, ElementType::Float64,  ElementType::Float8E4M3, ElementType::Float8E5M2,
};
constexpr ElementType kFloatingTypes[] = {ElementType::Float16, ElementType::BFloat16,   ElementType::Float32,
                                          ElementType::Float64, ElementType::Float8E4M3, ElementType::Float8E5M2};
constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg};

// What the reference needs to know of a floating type.
struct FloatFormat {
  int precision = 0;     // significand bits, the implicit one included (fp16: 11)
  int minExponent = 0;   // exponent of the smallest normal number (fp16: -14)
  double maxFinite = 0;  // largest finite value (fp16: 65504)
  double minSubnormal = 0;
  bool saturates = false;  // fp8: beyond maxFinite (infinities included) becomes +-maxFinite
  // The accumulation: unit roundoff (fp32 2^-24, fp64 2^-53) and smallest normal number
  // (subnormals there may be flushed to zero; the contract does not say).
  double accumulationRoundoff = 0;
  double accumulationMinNormal = 0;
};
FloatFormat floatFormat(ElementType type);  // floating types only

// fp8 on the host. The decoder is written out here; the encoder rounds to nearest even and
// saturates as __NV_SATFINITE does (cuda_fp8.h's host path): a NaN gives a NaN, anything
// beyond the largest finite value (infinities too) that value with its sign.
double fp8ToDouble(std::uint8_t bits, ElementType type);
std::uint8_t fp8FromDouble(double value, ElementType type);

// A buffer of `count` elements of `type` stored as raw bytes, as the GPU sees it.
struct HostBuffer {
  ElementType type;
  std::vector<std::uint8_t> bytes;
  std::size_t count() const { return bytes.size() / elementBytes(type); }
  // The element's value: exact for every floating type; integers converted to double, which
  // is exact up to 2^53 (intAt/uintAt are exact for every integer).
  double at(std::size_t i) const;
  // Floating types: rounds to the type (to nearest even; fp8 saturating, infinities
  // included, except that e5m2 keeps an infinity, which it can hold). Integer types:
  // `value` must be an integer within int64 or uint64; stored modulo 2^(8 x elementBytes).
  void set(std::size_t i, double value);

  // Integer types, exact. intAt: signed types sign-extend, unsigned ones zero-extend (a
  // uint64 above INT64_MAX comes back wrapped). uintAt: the value modulo 2^64.
  std::int64_t intAt(std::size_t i) const;
  std::uint64_t uintAt(std::size_t i) const { return static_cast<std::uint64_t>(intAt(i)); }
  // Integer types: stores `value` modulo 2^(8 x elementBytes), as the kernels wrap.
  void setInt(std::size_t i, std::int64_t value) { setBits(i, static_cast<std::uint64_t>(value)); }
  void setUInt(std::size_t i, std::uint64_t value) { setBits(i, value); }

  // Any type: the element's bits, zero-extended; setBits keeps the low 8 x elementBytes bits.
  std::uint64_t bitsAt(std::size_t i) const;
  void setBits(std::size_t i, std::uint64_t bits);
};

// The smallest and largest value of an integer type, as bits of the type.
std::uint64_t integerMinBits(ElementType type);
std::uint64_t integerMaxBits(ElementType type);

// Sum-style inputs: floating types uniform in [-1, 1] rounded to the type, integers as
// randomInputs(type, ReduceOp::Sum, ...) draws them.
HostBuffer randomBuffer(ElementType type, std::size_t count, Random& random);

// Inputs for which `op`'s reference is meaningful (host_data.cc says why each is chosen):
// Sum/Avg ordinary values of several magnitudes (integers: the full range, the extremes,
// small values); Prod values near 1 in magnitude (integers mostly -2..2, some of the full
// range); Min/Max values across the type's range with its extremes (largest finite, smallest
// subnormal, zeros; integers their minimum and maximum).
HostBuffer randomInputs(ElementType type, ReduceOp op, std::size_t count, Random& random);

// Every rank's inputs, coordinated element by element, full of IEEE specials (host_data.cc
// lists the patterns): NaN on every rank, on one, on all but one; +inf, +inf with -inf, -0.0
// on every rank, -0.0 with -inf; zeros, subnormals, the smallest normal and (where no
// order of fp32 accumulation could overflow differently) the largest finite value.
std::vector<HostBuffer> specialInputs(ElementType type, ReduceOp op, std::size_t count, int ranks, Random& random);

// What one element of every rank's output must hold.
struct Expected {
  bool exact = false;       // integers: `bits` exactly
  std::uint64_t bits = 0;
  double value = 0;         // floating types: NaN: any NaN; +-inf: that infinity
  // Floating Min and Max: `value` itself, or zero where `value` is a subnormal of the
  // accumulation type (which may be flushed); no tolerance.
  bool picked = false;
  double tolerance = 0;     // floating types: |got - value| at most this (after saturation)
  double accumulated = 0;   // the part of `tolerance` due to the accumulation, before rounding
};

Expected expectedElement(const std::vector<HostBuffer>& inputs, std::size_t i, ReduceOp op);
std::vector<Expected> expectedResults(const std::vector<HostBuffer>& inputs, ReduceOp op);
// An all-gather's output: every rank's input in rank order, bit for bit (NaN payloads and
// the sign of zero included): nothing is computed.
std::vector<Expected> gatheredResults(const std::vector<HostBuffer>& inputs);
// Whether element i of `out` (of `type`) satisfies `expected`.
bool matches(const Expected& expected, ElementType type, const HostBuffer& out, std::size_t i);
// The bits of an element of `type` that are no right answer for `expected`: all ones (NaN in
// every floating type), or all zeros where all ones is right. An output poisoned with these
// fails in every element a kernel leaves unwritten.
std::uint64_t wrongAnswerBits(const Expected& expected, ElementType type);
// An output whose every element holds wrongAnswerBits of its expected value.
HostBuffer wrongAnswers(const std::vector<Expected>& expected, ElementType type);
std::string describe(const Expected& expected, ElementType type);
std::string describeElement(const HostBuffer& out, std::size_t i);

// Compares `out` with the reference element by element; returns the number of mismatches and
// describes the first one in *first.
std::size_t countMismatches(const std::vector<Expected>& expected, const HostBuffer& out, std::string* first);
std::size_t countMismatches(const std::vector<HostBuffer>& inputs, const HostBuffer& out, ReduceOp op,
                            std::string* first);
// The sum, for the callers that only ever sum.
std::size_t countMismatches(const std::vector<HostBuffer>& inputs, const HostBuffer& out, std::string* first);

}  // namespace car::testing
