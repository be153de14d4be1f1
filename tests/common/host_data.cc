#include "host_data.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <sstream>

namespace car::testing {
namespace {

// Unit roundoff of the final rounding: half an ulp, relative.
double unitRoundoff(ElementType type) {
  switch (type) {
    case ElementType::Float16: return std::ldexp(1.0, -11);
    case ElementType::BFloat16: return std::ldexp(1.0, -8);
    case ElementType::Float32: return std::ldexp(1.0, -24);
  }
  return 0;
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

double HostBuffer::at(std::size_t i) const {
  switch (type) {
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
  }
  return NAN;
}

void HostBuffer::set(std::size_t i, double value) {
  const float f = static_cast<float>(value);
  switch (type) {
    case ElementType::Float16: {
      __half h = __float2half_rn(f);
      std::memcpy(&bytes[i * 2], &h, 2);
      break;
    }
    case ElementType::BFloat16: {
      __nv_bfloat16 h = __float2bfloat16_rn(f);
      std::memcpy(&bytes[i * 2], &h, 2);
      break;
    }
    case ElementType::Float32: std::memcpy(&bytes[i * 4], &f, 4); break;
  }
}

HostBuffer randomBuffer(ElementType type, std::size_t count, Random& random) {
  HostBuffer buffer{type, std::vector<std::uint8_t>(count * elementBytes(type))};
  for (std::size_t i = 0; i < count; ++i) buffer.set(i, random.uniform(-1.0, 1.0));
  return buffer;
}

std::size_t countMismatches(const std::vector<HostBuffer>& inputs, const HostBuffer& out,
                            std::string* first) {
  const double u = unitRoundoff(out.type);
  const double ranks = static_cast<double>(inputs.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < out.count(); ++i) {
    double reference = 0, magnitude = 0;
    for (const HostBuffer& input : inputs) {
      reference += input.at(i);
      magnitude += std::fabs(input.at(i));
    }
    // One rounding to the element type, plus fp32 accumulation over `ranks` terms.
    const double tolerance = u * std::fabs(reference) + ranks * std::ldexp(1.0, -23) * magnitude + 1e-7;
    const double got = out.at(i);
    // IEEE: a NaN input or inf + -inf gives NaN, an inf gives that inf; -0.0 equals +0.0.
    const bool right = std::isnan(reference)   ? std::isnan(got)
                       : std::isinf(reference) ? got == reference
                                               : std::fabs(got - reference) <= tolerance;  // NaN (poison) fails
    if (!right) {
      if (bad++ == 0 && first != nullptr) {
        std::ostringstream text;
        text << "element " << i << ": got " << got << ", expected " << reference << " +- " << tolerance;
        *first = text.str();
      }
    }
  }
  return bad;
}

}  // namespace car::testing
