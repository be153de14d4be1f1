#include "host_data.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>

namespace car::testing {
namespace {

int widthBits(ElementType type) { return 8 * elementBytes(type); }

std::uint64_t widthMask(ElementType type) {
  const int bits = widthBits(type);
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

// The low `widthBits(type)` bits of `bits` as a signed value of that width.
std::int64_t signExtend(std::uint64_t bits, ElementType type) {
  const int width = widthBits(type);
  if (width >= 64) return static_cast<std::int64_t>(bits);
  const int shift = 64 - width;
  return static_cast<std::int64_t>(bits << shift) >> shift;
}

// Half the spacing of `format`'s numbers around magnitude y (>= 0): the most one rounding to
// nearest can move a value of that magnitude. Below the normal range the spacing is fixed.
double halfUlpAt(const FloatFormat& format, double y) {
  int exponent = format.minExponent;
  if (y > 0 && std::isfinite(y)) exponent = std::max(std::ilogb(y), format.minExponent);
  return std::ldexp(1.0, exponent - format.precision);
}

// The smallest magnitude that rounds to infinity in a type that does not saturate: the
// largest finite value plus half its spacing (the tie goes to infinity, whose "mantissa" is even).
double overflowThreshold(const FloatFormat& format) {
  return format.maxFinite + halfUlpAt(format, format.maxFinite);
}

Expected integerExpected(const std::vector<HostBuffer>& inputs, std::size_t i, ReduceOp op, ElementType type) {
  const bool isSigned = isSignedInteger(type);
  const std::uint64_t mask = widthMask(type);
  const std::uint64_t ranks = inputs.size();
  // Unsigned arithmetic modulo 2^64 agrees with the type's own arithmetic modulo 2^width.
  std::uint64_t sum = 0, product = 1;
  std::int64_t signedLow = std::numeric_limits<std::int64_t>::max();
  std::int64_t signedHigh = std::numeric_limits<std::int64_t>::min();
  std::uint64_t unsignedLow = std::numeric_limits<std::uint64_t>::max(), unsignedHigh = 0;
  for (const HostBuffer& input : inputs) {
    const std::uint64_t bits = input.bitsAt(i);
    // The value modulo 2^64: sign-extended for signed types.
    const std::uint64_t value = isSigned ? static_cast<std::uint64_t>(signExtend(bits, type)) : bits;
    sum += value;
    product *= value;
    signedLow = std::min(signedLow, static_cast<std::int64_t>(value));
    signedHigh = std::max(signedHigh, static_cast<std::int64_t>(value));
    unsignedLow = std::min(unsignedLow, value);
    unsignedHigh = std::max(unsignedHigh, value);
  }
  Expected expected;
  expected.exact = true;
  switch (op) {
    case ReduceOp::Sum: expected.bits = sum & mask; break;
    case ReduceOp::Prod: expected.bits = product & mask; break;
    case ReduceOp::Min:
      expected.bits = (isSigned ? static_cast<std::uint64_t>(signedLow) : unsignedLow) & mask;
      break;
    case ReduceOp::Max:
      expected.bits = (isSigned ? static_cast<std::uint64_t>(signedHigh) : unsignedHigh) & mask;
      break;
    case ReduceOp::Avg: {
      // The sum wrapped in the type, then divided, truncating toward zero.
      const std::uint64_t wrapped = sum & mask;
      if (isSigned) {
        const std::int64_t quotient = signExtend(wrapped, type) / static_cast<std::int64_t>(ranks);
        expected.bits = static_cast<std::uint64_t>(quotient) & mask;
      } else {
        expected.bits = (wrapped / ranks) & mask;
      }
      break;
    }
    case ReduceOp::kCount: break;
  }
  return expected;
}

Expected floatingExpected(const std::vector<HostBuffer>& inputs, std::size_t i, ReduceOp op, ElementType type) {
  const FloatFormat format = floatFormat(type);
  const double ranks = static_cast<double>(inputs.size());
  // Error of the device's accumulation (any order of n - 1 roundings) and of this fp64 one.
  const double roundoff = format.accumulationRoundoff + std::ldexp(1.0, -53);
  double reference = 0, accumulation = 0;
  bool exactOp = false;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: {
      double sum = 0, magnitude = 0;
      for (const HostBuffer& input : inputs) {
        const double x = input.at(i);
        sum += x;
        magnitude += std::fabs(x);
      }
      reference = sum;
      accumulation = ranks * roundoff * magnitude;
      if (op == ReduceOp::Avg) {
        reference = sum / ranks;
        // The division's own rounding (also if done as a multiplication by 1 / ranks).
        accumulation = accumulation / ranks + 2 * format.accumulationRoundoff * std::fabs(reference);
      }
      break;
    }
    case ReduceOp::Prod: {
      double product = 1;
      for (const HostBuffer& input : inputs) product *= input.at(i);
      reference = product;
      accumulation = ranks * roundoff * std::fabs(product);
      break;
    }
    case ReduceOp::Min:
    case ReduceOp::Max: {
      // fmin/fmax ignore a NaN operand: NaN only when every rank's value is NaN.
      reference = NAN;
      for (const HostBuffer& input : inputs) {
        reference = op == ReduceOp::Min ? std::fmin(reference, input.at(i)) : std::fmax(reference, input.at(i));
      }
      exactOp = true;
      break;
    }
    case ReduceOp::kCount: break;
  }
  Expected expected;
  expected.value = reference;
  // Min and Max pick one input, which the type represents: no rounding, no tolerance.
  expected.picked = exactOp;
  if (std::isfinite(reference) && !exactOp) {
    // Subnormals of the accumulation type may be flushed to zero, one per operation.
    const double flushed = ranks * format.accumulationMinNormal;
    const double rounding = halfUlpAt(format, std::fabs(reference) + accumulation);
    expected.tolerance = accumulation + rounding + flushed;
    expected.accumulated = accumulation + flushed;
  }
  return expected;
}

std::string hexBits(std::uint64_t bits, ElementType type) {
  std::ostringstream text;
  text << "0x" << std::hex << std::setw(2 * elementBytes(type)) << std::setfill('0') << bits;
  return text.str();
}

}  // namespace

std::uint64_t Random::next() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return state_ * 0x2545F4914F6CDD1Dull;
}

double Random::uniform(double lo, double hi) {
  return lo + (hi - lo) * (static_cast<double>(next() >> 11) * std::ldexp(1.0, -53));
}

namespace {

FloatFormat makeFloatFormat(ElementType type) {
  FloatFormat format;
  format.accumulationRoundoff = std::ldexp(1.0, -24);
  format.accumulationMinNormal = std::ldexp(1.0, -126);
  switch (type) {
    case ElementType::Float16:
      format.precision = 11;
      format.minExponent = -14;
      format.maxFinite = 65504;
      break;
    case ElementType::BFloat16:
      format.precision = 8;
      format.minExponent = -126;
      format.maxFinite = std::ldexp(255.0, 120);  // 0x7F7F: 1.9921875 x 2^127
      break;
    case ElementType::Float32:
      format.precision = 24;
      format.minExponent = -126;
      format.maxFinite = FLT_MAX;
      break;
    case ElementType::Float64:
      format.precision = 53;
      format.minExponent = -1022;
      format.maxFinite = DBL_MAX;
      format.accumulationRoundoff = std::ldexp(1.0, -53);
      format.accumulationMinNormal = DBL_MIN;
      break;
    case ElementType::Float8E4M3:
      format.precision = 4;
      format.minExponent = -6;
      format.maxFinite = 448;
      format.saturates = true;
      break;
    case ElementType::Float8E5M2:
      format.precision = 3;
      format.minExponent = -14;
      format.maxFinite = 57344;
      format.saturates = true;
      break;
    default: break;
  }
  format.minSubnormal = std::ldexp(1.0, format.minExponent - format.precision + 1);
  return format;
}

}  // namespace

FloatFormat floatFormat(ElementType type) {
  // Asked for once per element checked: made once.
  static const std::array<FloatFormat, kElementTypeCount> formats = [] {
    std::array<FloatFormat, kElementTypeCount> all{};
    for (int t = 0; t < kElementTypeCount; ++t) all[t] = makeFloatFormat(static_cast<ElementType>(t));
    return all;
  }();
  return formats[static_cast<int>(type)];
}

namespace {

double decodeFp8(std::uint8_t bits, ElementType type) {
  const bool negative = (bits & 0x80) != 0;
  double magnitude = 0;
  if (type == ElementType::Float8E4M3) {
    // 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinity, S.1111.111 is NaN.
    const int exponent = (bits >> 3) & 0xF;
    const int mantissa = bits & 0x7;
    if (exponent == 0xF && mantissa == 0x7) return NAN;
    magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 7 - 3);
  } else {
    // 1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like infinities and NaNs.
    const int exponent = (bits >> 2) & 0x1F;
    const int mantissa = bits & 0x3;
    if (exponent == 0x1F) {
      if (mantissa != 0) return NAN;
      magnitude = INFINITY;
    } else {
      magnitude = exponent == 0 ? std::ldexp(mantissa, -16) : std::ldexp(4 + mantissa, exponent - 15 - 2);
    }
  }
  return negative ? -magnitude : magnitude;
}

}  // namespace

double fp8ToDouble(std::uint8_t bits, ElementType type) {
  // Read once per input element by the reference: a table per kind.
  using Table = std::array<double, 256>;
  auto make = [](ElementType kind) {
    Table table{};
    for (int code = 0; code < 256; ++code) table[code] = decodeFp8(static_cast<std::uint8_t>(code), kind);
    return table;
  };
  static const Table e4m3 = make(ElementType::Float8E4M3);
  static const Table e5m2 = make(ElementType::Float8E5M2);
  return (type == ElementType::Float8E4M3 ? e4m3 : e5m2)[bits];
}

std::uint8_t fp8FromDouble(double value, ElementType type) {
  return __nv_cvt_double_to_fp8(value, __NV_SATFINITE, type == ElementType::Float8E4M3 ? __NV_E4M3 : __NV_E5M2);
}

std::uint64_t HostBuffer::bitsAt(std::size_t i) const {
  const int size = elementBytes(type);
  std::uint64_t bits = 0;  // little-endian host: the low bytes
  std::memcpy(&bits, &bytes[i * size], size);
  return bits;
}

void HostBuffer::setBits(std::size_t i, std::uint64_t bits) {
  const int size = elementBytes(type);
  std::memcpy(&bytes[i * size], &bits, size);
}

std::int64_t HostBuffer::intAt(std::size_t i) const {
  const std::uint64_t bits = bitsAt(i);
  return isSignedInteger(type) ? signExtend(bits, type) : static_cast<std::int64_t>(bits);
}

double HostBuffer::at(std::size_t i) const {
  switch (type) {
    case ElementType::Int8:
    case ElementType::Int32:
    case ElementType::Int64: return static_cast<double>(intAt(i));
    case ElementType::UInt8:
    case ElementType::UInt32:
    case ElementType::UInt64: return static_cast<double>(uintAt(i));
    case ElementType::Float16: {
      __half h;
      std::memcpy(&h, &bytes[i * 2], 2);
      return __half2float(h);
    }
    case ElementType::BFloat16: {
      __nv_bfloat16 h;
      std::memcpy(&h, &bytes[i * 2], 2);
      return __bfloat162float(h);
    }
    case ElementType::Float32: {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      return f;
    }
    case ElementType::Float64: {
      double d;
      std::memcpy(&d, &bytes[i * 8], 8);
      return d;
    }
    case ElementType::Float8E4M3:
    case ElementType::Float8E5M2: return fp8ToDouble(bytes[i], type);
    case ElementType::kCount: break;
  }
  return NAN;
}

void HostBuffer::set(std::size_t i, double value) {
  if (isInteger(type)) {
    if (value < 0) {
      setInt(i, static_cast<std::int64_t>(value));
    } else if (value < std::ldexp(1.0, 63)) {
      setInt(i, static_cast<std::int64_t>(value));
    } else {
      setUInt(i, static_cast<std::uint64_t>(value));
    }
    return;
  }
  switch (type) {
    case ElementType::Float16: {
      __half h = __float2half_rn(static_cast<float>(value));
      std::memcpy(&bytes[i * 2], &h, 2);
      break;
    }
    case ElementType::BFloat16: {
      __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(value));
      std::memcpy(&bytes[i * 2], &h, 2);
      break;
    }
    case ElementType::Float32: {
      const float f = static_cast<float>(value);
      std::memcpy(&bytes[i * 4], &f, 4);
      break;
    }
    case ElementType::Float64: std::memcpy(&bytes[i * 8], &value, 8); break;
    case ElementType::Float8E4M3: bytes[i] = fp8FromDouble(value, type); break;
    case ElementType::Float8E5M2:
      // e5m2 holds infinities; the saturating encoder would make them its largest finite value.
      bytes[i] = std::isinf(value) ? (value > 0 ? 0x7C : 0xFC) : fp8FromDouble(value, type);
      break;
    default: break;
  }
}

std::uint64_t integerMinBits(ElementType type) {
  return isSignedInteger(type) ? std::uint64_t{1} << (widthBits(type) - 1) : 0;
}

std::uint64_t integerMaxBits(ElementType type) {
  return isSignedInteger(type) ? (std::uint64_t{1} << (widthBits(type) - 1)) - 1 : widthMask(type);
}

HostBuffer randomBuffer(ElementType type, std::size_t count, Random& random) {
  if (isInteger(type)) return randomInputs(type, ReduceOp::Sum, count, random);
  HostBuffer buffer{type, std::vector<std::uint8_t>(count * elementBytes(type))};
  for (std::size_t i = 0; i < count; ++i) buffer.set(i, random.uniform(-1.0, 1.0));
  return buffer;
}

HostBuffer randomInputs(ElementType type, ReduceOp op, std::size_t count, Random& random) {
  HostBuffer buffer{type, std::vector<std::uint8_t>(count * elementBytes(type))};
  if (isInteger(type)) {
    const std::uint64_t extremes[] = {integerMinBits(type), integerMaxBits(type), 0, ~std::uint64_t{0}, 1};
    // Within [-limit, limit] for signed types, [0, 2 x limit] for unsigned ones.
    auto small = [&random, type](std::int64_t limit) {
      const std::int64_t value = static_cast<std::int64_t>(random.below(static_cast<std::uint64_t>(2 * limit + 1)));
      return isSignedInteger(type) ? value - limit : value;
    };
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t kind = random.below(8);
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Avg:
          // The same index on every rank: all at the maximum (the sum wraps for any world
          // size), or all at the minimum (signed: wraps too).
          if (i % 17 == 0) {
            buffer.setBits(i, integerMaxBits(type));
          } else if (i % 17 == 1) {
            buffer.setBits(i, integerMinBits(type));
          } else if (kind < (op == ReduceOp::Sum ? 4u : 3u)) {
            buffer.setBits(i, random.next());  // the full range: sums wrap
          } else if (kind == (op == ReduceOp::Sum ? 4u : 3u)) {
            buffer.setBits(i, extremes[random.below(5)]);
          } else if (op == ReduceOp::Sum) {
            buffer.setInt(i, small(100));
          } else {
            // Small sums (of either sign where the type has one): the truncation toward zero shows.
            buffer.setInt(i, small(20));
          }
          break;
        case ReduceOp::Prod: {
          static constexpr std::int64_t kSmall[] = {-2, -1, 1, 2};
          if (i % 13 == 0) {
            buffer.setInt(i, 2);  // 2^ranks: wraps in 8 bits from 7 ranks (int8) or 8 (uint8)
          } else if (i % 13 == 1) {
            buffer.setInt(i, -1);
          } else if (random.below(64) == 0) {
            buffer.setInt(i, 0);
          } else if (kind < 6) {
            buffer.setInt(i, kSmall[random.below(4)]);
          } else if (kind == 6) {
            buffer.setInt(i, small(9));
          } else {
            buffer.setBits(i, random.next());  // wraps, exactly defined all the same
          }
          break;
        }
        case ReduceOp::Min:
        case ReduceOp::Max:
          if (kind < 4) {
            buffer.setBits(i, random.next());
          } else if (kind == 4) {
            buffer.setBits(i, integerMinBits(type));
          } else if (kind == 5) {
            buffer.setBits(i, integerMaxBits(type));
          } else if (kind == 6) {
            buffer.setBits(i, random.below(2) == 0 ? 0 : ~std::uint64_t{0});
          } else {
            buffer.setInt(i, small(100));
          }
          break;
        case ReduceOp::kCount: break;
      }
    }
    return buffer;
  }
  const FloatFormat format = floatFormat(type);
  // fp8 values stay small enough that 8 ranks' sums need no saturation: exactly
  // representable (set() rounds) and at most 32 in magnitude.
  const bool fp8 = format.saturates;
  for (std::size_t i = 0; i < count; ++i) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: {
        const double span = fp8 ? 2.0 : 1.0;
        double value = random.uniform(-span, span);
        // A quarter at other magnitudes, so that sums cancel across binades.
        if (random.below(4) == 0) value = std::ldexp(value, static_cast<int>(random.below(fp8 ? 9 : 17)) - (fp8 ? 4 : 8));
        buffer.set(i, value);
        break;
      }
      case ReduceOp::Prod: {
        // Near 1 in magnitude: 8 factors stay within [0.1, 6], far from under- and overflow.
        const double magnitude = random.uniform(0.75, 1.25);
        buffer.set(i, random.below(2) == 0 ? magnitude : -magnitude);
        break;
      }
      case ReduceOp::Min:
      case ReduceOp::Max: {
        // The type's extremes now and then; otherwise values across many binades.
        const double minNormal = std::ldexp(1.0, format.minExponent);
        const double specials[] = {format.maxFinite, -format.maxFinite, format.minSubnormal, -format.minSubnormal,
                                   0.0,              -0.0,              minNormal,           -minNormal};
        const std::uint64_t pick = random.below(16);
        if (pick < 8) {
          buffer.set(i, specials[pick]);
        } else {
          buffer.set(i, std::ldexp(random.uniform(-1.0, 1.0), static_cast<int>(random.below(21)) - 10));
        }
        break;
      }
      case ReduceOp::kCount: break;
    }
  }
  return buffer;
}

std::vector<HostBuffer> specialInputs(ElementType type, ReduceOp op, std::size_t count, int ranks, Random& random) {
  const FloatFormat format = floatFormat(type);
  const double minNormal = std::ldexp(1.0, format.minExponent);
  auto ordinary = [&]() {
    switch (op) {
      case ReduceOp::Prod: {
        const double magnitude = random.uniform(0.75, 1.25);
        return random.below(2) == 0 ? magnitude : -magnitude;
      }
      case ReduceOp::Min:
      case ReduceOp::Max: return std::ldexp(random.uniform(-1.0, 1.0), static_cast<int>(random.below(21)) - 10);
      default: return random.uniform(-2.0, 2.0);
    }
  };
  // The largest finite value only where every order of fp32 accumulation agrees on whether
  // it overflows: sums of it overflow in any order (only +max is drawn); averages and products
  // only for types far below fp32's range; Min and Max never overflow.
  const bool smallRange = type == ElementType::Float16 || floatFormat(type).saturates;
  std::vector<double> table = {-0.0, 0.0, format.minSubnormal, -format.minSubnormal, minNormal};
  if (op == ReduceOp::Sum || ((op == ReduceOp::Avg || op == ReduceOp::Prod) && smallRange)) {
    table.push_back(format.maxFinite);
  }
  if (op == ReduceOp::Min || op == ReduceOp::Max) {
    table.push_back(format.maxFinite);
    table.push_back(-format.maxFinite);
  }
  std::vector<HostBuffer> inputs(ranks, HostBuffer{type, std::vector<std::uint8_t>(count * elementBytes(type))});
  std::vector<double> values(ranks);
  for (std::size_t i = 0; i < count; ++i) {
    const int first = static_cast<int>((i / 8) % ranks);
    const int second = (first + 1) % ranks;
    for (double& value : values) value = ordinary();
    switch (i % 8) {
      case 0:  // NaN everywhere: NaN for every op
        for (double& value : values) value = NAN;
        break;
      case 1:  // NaN on one rank: Sum, Prod, Avg NaN; Min and Max ignore it
        values[first] = NAN;
        break;
      case 2:  // NaN on all ranks but one: Min and Max give that one's value
        for (int r = 0; r < ranks; ++r) {
          if (r != first) values[r] = NAN;
        }
        break;
      case 3:  // +inf on one rank (e4m3 has none: it holds 448 instead)
        values[first] = INFINITY;
        break;
      case 4:  // +inf and -inf: Sum NaN, Prod an infinity, Min -inf, Max +inf
        values[first] = INFINITY;
        values[second] = -INFINITY;
        break;
      case 5:  // -0.0 everywhere: a zero of either sign
        for (double& value : values) value = -0.0;
        break;
      case 6:  // -0.0 and -inf: Prod NaN (0 x inf), Sum -inf
        values[first] = -0.0;
        values[second] = -INFINITY;
        break;
      default:  // zeros, subnormals, extremes and ordinary values, rank by rank
        for (double& value : values) {
          const std::uint64_t pick = random.below(table.size() + 2);  // else the ordinary value
          if (pick < table.size()) value = table[pick];
        }
        break;
    }
    for (int r = 0; r < ranks; ++r) inputs[r].set(i, values[r]);
  }
  return inputs;
}

Expected expectedElement(const std::vector<HostBuffer>& inputs, std::size_t i, ReduceOp op) {
  const ElementType type = inputs.front().type;
  return isInteger(type) ? integerExpected(inputs, i, op, type) : floatingExpected(inputs, i, op, type);
}

std::vector<Expected> expectedResults(const std::vector<HostBuffer>& inputs, ReduceOp op) {
  std::vector<Expected> expected(inputs.front().count());
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = expectedElement(inputs, i, op);
  return expected;
}

std::vector<Expected> gatheredResults(const std::vector<HostBuffer>& inputs) {
  std::vector<Expected> expected;
  for (const HostBuffer& input : inputs) {
    for (std::size_t i = 0; i < input.count(); ++i) {
      Expected element;
      element.exact = true;
      element.bits = input.bitsAt(i);
      expected.push_back(element);
    }
  }
  return expected;
}

bool matches(const Expected& expected, ElementType type, const HostBuffer& out, std::size_t i) {
  if (expected.exact) return out.bitsAt(i) == expected.bits;
  const FloatFormat format = floatFormat(type);
  const double got = out.at(i);
  if (std::isnan(expected.value)) return std::isnan(got);
  if (std::isnan(got)) return false;  // 0xFF poison is NaN in every floating type
  if (std::isinf(expected.value)) {
    return format.saturates ? got == std::copysign(format.maxFinite, expected.value) : got == expected.value;
  }
  if (expected.picked) {
    // That very value (either zero's sign), or zero where it is a subnormal of the
    // accumulation type, which may be flushed; never another input.
    return got == expected.value || (got == 0 && std::fabs(expected.value) < format.accumulationMinNormal);
  }
  double low = expected.value - expected.tolerance;
  double high = expected.value + expected.tolerance;
  if (format.saturates) {
    low = std::clamp(low, -format.maxFinite, format.maxFinite);
    high = std::clamp(high, -format.maxFinite, format.maxFinite);
    return got >= low && got <= high;  // an infinity (e5m2) fails
  }
  if (std::isinf(got)) {
    // Rounding overflowed: right only if the accumulated value may lie at or beyond the
    // threshold (the rounding's own half spacing is what the threshold already counts).
    const double threshold = overflowThreshold(format);
    return got > 0 ? expected.value + expected.accumulated >= threshold
                   : expected.value - expected.accumulated <= -threshold;
  }
  return got >= low && got <= high;  // -0.0 and +0.0 compare equal
}

namespace {

// wrongAnswerBits with a one-element buffer of `type` to try the bits in.
std::uint64_t wrongAnswerIn(HostBuffer& probe, const Expected& expected) {
  probe.setBits(0, ~std::uint64_t{0});
  if (!matches(expected, probe.type, probe, 0)) return probe.bitsAt(0);
  // All ones is right: a NaN is expected (all zeros is a zero, never a NaN) or an integer of
  // all ones (all zeros is another integer).
  return 0;
}

}  // namespace

std::uint64_t wrongAnswerBits(const Expected& expected, ElementType type) {
  HostBuffer probe{type, std::vector<std::uint8_t>(elementBytes(type))};
  return wrongAnswerIn(probe, expected);
}

HostBuffer wrongAnswers(const std::vector<Expected>& expected, ElementType type) {
  HostBuffer probe{type, std::vector<std::uint8_t>(elementBytes(type))};
  HostBuffer wrong{type, std::vector<std::uint8_t>(expected.size() * elementBytes(type))};
  for (std::size_t i = 0; i < expected.size(); ++i) wrong.setBits(i, wrongAnswerIn(probe, expected[i]));
  return wrong;
}

std::string describe(const Expected& expected, ElementType type) {
  std::ostringstream text;
  if (expected.exact) {
    const std::int64_t value = isSignedInteger(type) ? signExtend(expected.bits, type)
                                                     : static_cast<std::int64_t>(expected.bits);
    if (isSignedInteger(type)) {
      text << value;
    } else {
      text << expected.bits;
    }
    text << " (" << hexBits(expected.bits, type) << ")";
    return text.str();
  }
  text << std::setprecision(17) << expected.value;
  if (expected.picked && std::isfinite(expected.value)) {
    if (std::fabs(expected.value) < floatFormat(type).accumulationMinNormal) text << " or a flushed zero";
  } else if (std::isfinite(expected.value)) {
    text << " +- " << std::setprecision(6) << expected.tolerance;
  }
  if (floatFormat(type).saturates) text << " (saturating at " << floatFormat(type).maxFinite << ")";
  return text.str();
}

std::string describeElement(const HostBuffer& out, std::size_t i) {
  std::ostringstream text;
  if (isSignedInteger(out.type)) {
    text << out.intAt(i);
  } else if (isInteger(out.type)) {
    text << out.uintAt(i);
  } else {
    text << std::setprecision(17) << out.at(i);
  }
  text << " (" << hexBits(out.bitsAt(i), out.type) << ")";
  return text.str();
}

std::size_t countMismatches(const std::vector<Expected>& expected, const HostBuffer& out, std::string* first) {
  std::size_t bad = 0;
  const std::size_t count = std::min(expected.size(), out.count());
  for (std::size_t i = 0; i < count; ++i) {
    if (matches(expected[i], out.type, out, i)) continue;
    if (bad++ == 0 && first != nullptr) {
      *first = "element " + std::to_string(i) + ": got " + describeElement(out, i) + ", expected " +
               describe(expected[i], out.type);
    }
  }
  if (expected.size() != out.count()) {
    bad += expected.size() > out.count() ? expected.size() - out.count() : out.count() - expected.size();
    if (first != nullptr && first->empty()) *first = "the output has the wrong number of elements";
  }
  return bad;
}

std::size_t countMismatches(const std::vector<HostBuffer>& inputs, const HostBuffer& out, ReduceOp op,
                            std::string* first) {
  return countMismatches(expectedResults(inputs, op), out, first);
}

std::size_t countMismatches(const std::vector<HostBuffer>& inputs, const HostBuffer& out, std::string* first) {
  return countMismatches(inputs, out, ReduceOp::Sum, first);
}

}  // namespace car::testing
