#include "rank_order.h"

#include <cfloat>
#include <cmath>
#include <cstring>

namespace car::testing {

// The model's arithmetic must be the kernels': one IEEE operation in the accumulation type
// at a time, rounded to nearest. x86-64 (SSE) and AArch64 evaluate float in float.
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "rank_order.cc needs float arithmetic evaluated in float (FLT_EVAL_METHOD 0)"
#endif

namespace {

// The kernels' combine (kernels/packs.cuh) on the host: min and max as fmin and fmax.
template <typename A>
A combined(ReduceOp op, A a, A b) {
  switch (op) {
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Min: return std::fmin(a, b);
    case ReduceOp::Max: return std::fmax(a, b);
    default: return a + b;
  }
}

template <typename A>
A reducedInOrder(const std::vector<HostBuffer>& inputs, std::size_t i, ReduceOp op, const std::vector<int>& order) {
  A value = static_cast<A>(inputs[order[0]].at(i));
  for (std::size_t k = 1; k < order.size(); ++k) value = combined(op, value, static_cast<A>(inputs[order[k]].at(i)));
  if (op == ReduceOp::Avg) value = value / static_cast<A>(inputs.size());
  return value;
}

std::uint64_t signBitOf(ElementType type) { return std::uint64_t{1} << (8 * elementBytes(type) - 1); }

}  // namespace

HostBuffer combinedInOrder(const std::vector<HostBuffer>& inputs, ReduceOp op, const std::vector<int>& order,
                           bool positiveZeros) {
  const ElementType type = inputs.at(0).type;
  const std::size_t count = inputs[0].count();
  HostBuffer out{type, std::vector<std::uint8_t>(inputs[0].bytes.size())};
  const std::uint64_t sign = signBitOf(type);
  for (std::size_t i = 0; i < count; ++i) {
    if (type == ElementType::Float64) {
      out.set(i, reducedInOrder<double>(inputs, i, op, order));
      continue;
    }
    const float value = reducedInOrder<float>(inputs, i, op, order);
    // One rounding to the type, as the kernels' conversions round (fp8: the saturating
    // encoder, infinities included; set() would keep an e5m2 infinity).
    if (isFp8(type)) {
      out.bytes[i] = fp8FromDouble(value, type);
    } else {
      out.set(i, value);
    }
    if (positiveZeros && (out.bitsAt(i) & ~sign) == 0) out.setBits(i, 0);
  }
  return out;
}

HostBuffer rankOrderResult(const std::vector<HostBuffer>& inputs, ReduceOp op) {
  return combinedInOrder(inputs, op, rotatedOrder(static_cast<int>(inputs.size()), 0));
}

std::vector<int> rotatedOrder(int ranks, int first) {
  std::vector<int> order(ranks);
  for (int k = 0; k < ranks; ++k) order[k] = (first + k) % ranks;
  return order;
}

bool sameResult(const HostBuffer& a, const HostBuffer& b, std::size_t i) {
  const double x = a.at(i), y = b.at(i);
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (a.type == ElementType::Float64 && x == 0 && y == 0) return true;
  return a.bitsAt(i) == b.bitsAt(i);
}

std::size_t countDifferentResults(const HostBuffer& expected, const HostBuffer& got, std::string* first) {
  const std::size_t count = std::min(expected.count(), got.count());
  std::size_t different = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (sameResult(expected, got, i)) continue;
    if (different++ == 0 && first != nullptr) {
      *first = "element " + std::to_string(i) + ": got " + describeElement(got, i) + ", expected " +
               describeElement(expected, i);
    }
  }
  return different;
}

HostBuffer withoutSentinelWords(const HostBuffer& input) {
  HostBuffer sent = input;
  for (std::size_t word = 0; word + 4 <= sent.bytes.size(); word += 4) {
    std::uint32_t bits;
    std::memcpy(&bits, &sent.bytes[word], 4);
    if (bits == 0x80000000u) std::memset(&sent.bytes[word], 0, 4);
  }
  // A last partial word is padded with zeros on the wire: its top byte is 0, never the sentinel's.
  return sent;
}

namespace {

// Binades the ordinary values span, per type: wide enough that fp32 sums of the type's
// significands round (so that the order shows), narrow enough that no sum of 8 comes near
// the type's largest finite value (where the order could decide an overflow, which the
// tolerance reference of host_data.h does not model).
struct Binades {
  int low, high;
};

Binades ordinaryBinades(ElementType type) {
  switch (type) {
    case ElementType::Float16: return {-24, 10};
    case ElementType::BFloat16: return {-30, 30};
    case ElementType::Float8E4M3: return {-9, 4};
    case ElementType::Float8E5M2: return {-16, 10};
    default: return {-12, 12};  // fp32, fp64: full significands, every sum of two binades rounds
  }
}

double signed1(Random& random, double magnitude) { return random.below(2) == 0 ? magnitude : -magnitude; }

// A value whose sum with -value and a small one depends on the order: the small one is below
// half the accumulation's spacing at `big` (2^-26 of it in fp32, 2^-55 in fp64), so
// big + (-big + small) loses it and (big - big) + small keeps it. 0 where the type cannot
// hold such a pair (e4m3, whose sums are exact in fp32 anyway).
double cancellingBig(ElementType type) {
  switch (type) {
    case ElementType::Float16:
    case ElementType::Float8E5M2: return std::ldexp(1.0, 14);
    case ElementType::Float8E4M3: return 0;
    default: return std::ldexp(1.0, 60);  // bf16, fp32, fp64
  }
}

double cancelledSmall(ElementType type, Random& random) {
  const int below = type == ElementType::Float64 ? 55 : 26;
  return signed1(random, std::ldexp(cancellingBig(type), -below));
}

double ordinaryValue(ElementType type, ReduceOp op, Random& random) {
  if (op == ReduceOp::Prod) return signed1(random, random.uniform(0.5, 2.0));  // full significands, near 1
  const Binades binades = ordinaryBinades(type);
  const int binade = binades.low + static_cast<int>(random.below(static_cast<std::uint64_t>(binades.high - binades.low + 1)));
  return signed1(random, std::ldexp(random.uniform(1.0, 2.0), binade));
}

}  // namespace

std::vector<HostBuffer> invarianceInputs(ElementType type, ReduceOp op, std::size_t count, int ranks,
                                         std::uint64_t seed) {
  Random random(seed);
  const FloatFormat format = floatFormat(type);
  const double minNormal = std::ldexp(1.0, format.minExponent);
  std::vector<HostBuffer> inputs(ranks, HostBuffer{type, std::vector<std::uint8_t>(count * elementBytes(type))});
  std::vector<double> values(ranks);
  for (std::size_t i = 0; i < count; ++i) {
    const int one = static_cast<int>(random.below(static_cast<std::uint64_t>(ranks)));
    const int other = (one + 1) % ranks;
    for (double& value : values) value = ordinaryValue(type, op, random);
    switch (random.below(16)) {
      case 0:  // -0.0 everywhere: IEEE gives -0.0 for every op, the kernels +0.0
        for (double& value : values) value = -0.0;
        break;
      case 1:  // zeros of either sign
        for (double& value : values) value = random.below(2) == 0 ? 0.0 : -0.0;
        break;
      case 2:  // one negative subnormal among zeros (products: among small normals): Avg and
               // Prod round to -0.0 in the type
        for (double& value : values) value = op == ReduceOp::Prod ? minNormal : 0.0;
        values[one] = -format.minSubnormal;
        break;
      case 3:  // NaN on one rank
        values[one] = NAN;
        break;
      case 4:  // +inf on one rank, -inf on another (e4m3 holds 448 for each)
        values[one] = INFINITY;
        if (random.below(2) == 0) values[other] = -INFINITY;
        break;
      case 5:  // subnormals of either sign everywhere
        for (double& value : values) value = signed1(random, format.minSubnormal * static_cast<double>(1 + random.below(3)));
        break;
      case 6:
      case 7:  // big, -big and a small value that survives in some orders only (sums)
        if (op != ReduceOp::Prod && cancellingBig(type) != 0 && ranks >= 3) {
          for (double& value : values) value = 0.0;
          values[one] = cancellingBig(type);
          values[other] = -cancellingBig(type);
          values[(one + 2) % ranks] = cancelledSmall(type, random);
        }
        break;
      default: break;  // ordinary values
    }
    for (int r = 0; r < ranks; ++r) inputs[r].set(i, values[r]);
  }
  // Below fp64, some 32-bit words that are the push kernels' sentinel (a -0.0 on top of
  // zeros, kernels/lamport.cuh) on some ranks, or on all: those kernels send them as +0.0.
  // Drawn from a stream of their own, word by word: a shorter draw stays a prefix.
  if (type != ElementType::Float64) {
    Random pick(seed + 0x5e471e1);
    for (std::size_t word = 5; (word + 1) * 4 <= inputs[0].bytes.size(); word += 29) {
      const bool everyRank = pick.below(3) == 0;
      for (HostBuffer& input : inputs) {
        if (pick.below(2) != 0 && !everyRank) continue;
        const std::uint32_t sentinel = 0x80000000u;
        std::memcpy(&input.bytes[4 * word], &sentinel, 4);
      }
    }
  }
  return inputs;
}

}  // namespace car::testing
