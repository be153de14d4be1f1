// The GPU tests' reference itself (tests/common/host_data.*): integer wrap-around, Avg's
// truncation of the wrapped sum, the fp8 codec against cuda_fp8.h, and the floating tolerance
// (one fp32 accumulation, one rounding to nearest even, fp8 saturation, IEEE specials).
#include <catch2/catch.hpp>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "host_data.h"

using namespace car;
using namespace car::testing;

namespace {

// One element per rank.
std::vector<HostBuffer> signedInputs(ElementType type, const std::vector<std::int64_t>& values) {
  std::vector<HostBuffer> inputs;
  for (std::int64_t value : values) {
    inputs.push_back(HostBuffer{type, std::vector<std::uint8_t>(elementBytes(type))});
    inputs.back().setInt(0, value);
  }
  return inputs;
}

std::vector<HostBuffer> unsignedInputs(ElementType type, const std::vector<std::uint64_t>& values) {
  std::vector<HostBuffer> inputs;
  for (std::uint64_t value : values) {
    inputs.push_back(HostBuffer{type, std::vector<std::uint8_t>(elementBytes(type))});
    inputs.back().setUInt(0, value);
  }
  return inputs;
}

std::vector<HostBuffer> floatInputs(ElementType type, const std::vector<double>& values) {
  std::vector<HostBuffer> inputs;
  for (double value : values) {
    inputs.push_back(HostBuffer{type, std::vector<std::uint8_t>(elementBytes(type))});
    inputs.back().set(0, value);
    // The reference is built from what the type holds: the test values must be exact.
    REQUIRE((inputs.back().at(0) == value || (std::isnan(value) && std::isnan(inputs.back().at(0)))));
  }
  return inputs;
}

// The reference's exact integer result, as a signed or unsigned value of the type.
std::int64_t signedResult(const std::vector<HostBuffer>& inputs, ReduceOp op) {
  const Expected expected = expectedElement(inputs, 0, op);
  REQUIRE(expected.exact);
  HostBuffer out{inputs.front().type, std::vector<std::uint8_t>(elementBytes(inputs.front().type))};
  out.setBits(0, expected.bits);
  return out.intAt(0);
}

std::uint64_t unsignedResult(const std::vector<HostBuffer>& inputs, ReduceOp op) {
  const Expected expected = expectedElement(inputs, 0, op);
  REQUIRE(expected.exact);
  return expected.bits;
}

// Whether the reference accepts `got` (stored in the type, bit pattern `bits` when given).
bool accepts(const std::vector<HostBuffer>& inputs, ReduceOp op, double got) {
  const ElementType type = inputs.front().type;
  HostBuffer out{type, std::vector<std::uint8_t>(elementBytes(type))};
  out.set(0, got);
  REQUIRE((out.at(0) == got || (std::isnan(got) && std::isnan(out.at(0)))));
  return matches(expectedElement(inputs, 0, op), type, out, 0);
}

bool acceptsBits(const std::vector<HostBuffer>& inputs, ReduceOp op, std::uint64_t bits) {
  const ElementType type = inputs.front().type;
  HostBuffer out{type, std::vector<std::uint8_t>(elementBytes(type))};
  out.setBits(0, bits);
  return matches(expectedElement(inputs, 0, op), type, out, 0);
}

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::uint64_t kUInt64Max = std::numeric_limits<std::uint64_t>::max();

}  // namespace

TEST_CASE("integer reference: Sum and Prod wrap in the type's width, exactly", "[reference]") {
  CHECK(signedResult(signedInputs(ElementType::Int8, {127, 1}), ReduceOp::Sum) == -128);
  CHECK(signedResult(signedInputs(ElementType::Int8, {-128, -1}), ReduceOp::Sum) == 127);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt8, {200, 100}), ReduceOp::Sum) == 44);
  CHECK(signedResult(signedInputs(ElementType::Int32, {2147483647, 2147483647}), ReduceOp::Sum) == -2);
  CHECK(signedResult(signedInputs(ElementType::Int64, {kInt64Max, 1}), ReduceOp::Sum) == kInt64Min);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt64, {kUInt64Max, 2}), ReduceOp::Sum) == 1);
  // Beyond double's 53 bits: 2^53 + 1 is not a double.
  CHECK(signedResult(signedInputs(ElementType::Int64, {std::int64_t{1} << 53, 1}), ReduceOp::Sum) ==
        (std::int64_t{1} << 53) + 1);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt64, {kUInt64Max - 2, 1}), ReduceOp::Sum) == kUInt64Max - 1);

  CHECK(signedResult(signedInputs(ElementType::Int8, {16, 16}), ReduceOp::Prod) == 0);
  CHECK(signedResult(signedInputs(ElementType::Int8, {2, 2, 2, 2, 2, 2, 2}), ReduceOp::Prod) == -128);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt8, {2, 2, 2, 2, 2, 2, 2, 2}), ReduceOp::Prod) == 0);
  CHECK(signedResult(signedInputs(ElementType::Int8, {-1, -1, -1}), ReduceOp::Prod) == -1);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt32, {65536, 65536}), ReduceOp::Prod) == 0);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt32, {0xFFFFFFFFu, 0xFFFFFFFFu}), ReduceOp::Prod) == 1);
  CHECK(signedResult(signedInputs(ElementType::Int64, {std::int64_t{1} << 32, std::int64_t{1} << 32}),
                     ReduceOp::Prod) == 0);
  // 3 (2^63 - 1) = 2^64 + 2^63 - 3: modulo 2^64, 2^63 - 3.
  CHECK(signedResult(signedInputs(ElementType::Int64, {3, kInt64Max}), ReduceOp::Prod) == kInt64Max - 2);
  // Unsigned "-1" is the maximum: its square is 1.
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt64, {kUInt64Max, kUInt64Max}), ReduceOp::Prod) == 1);
}

TEST_CASE("integer reference: Min and Max exact, Avg the wrapped sum divided toward zero", "[reference]") {
  CHECK(signedResult(signedInputs(ElementType::Int8, {-128, 127, 0}), ReduceOp::Min) == -128);
  CHECK(signedResult(signedInputs(ElementType::Int8, {-128, 127, 0}), ReduceOp::Max) == 127);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt8, {0, 255}), ReduceOp::Min) == 0);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt8, {0, 255}), ReduceOp::Max) == 255);
  CHECK(signedResult(signedInputs(ElementType::Int32, {-1, 1}), ReduceOp::Min) == -1);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt32, {0xFFFFFFFFu, 1}), ReduceOp::Min) == 1);
  CHECK(signedResult(signedInputs(ElementType::Int64, {kInt64Min, kInt64Max - 1}), ReduceOp::Max) == kInt64Max - 1);
  CHECK(signedResult(signedInputs(ElementType::Int64, {kInt64Min, kInt64Max - 1}), ReduceOp::Min) == kInt64Min);
  // Neighbours no double tells apart.
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt64, {kUInt64Max, kUInt64Max - 1}), ReduceOp::Min) ==
        kUInt64Max - 1);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt64, {kUInt64Max, 0}), ReduceOp::Max) == kUInt64Max);

  CHECK(signedResult(signedInputs(ElementType::Int32, {-7, 0}), ReduceOp::Avg) == -3);  // not -4
  CHECK(signedResult(signedInputs(ElementType::Int32, {7, 0}), ReduceOp::Avg) == 3);
  CHECK(signedResult(signedInputs(ElementType::Int32, {-8, 1, 0}), ReduceOp::Avg) == -2);
  // 3 x 127 = 381 wraps to 125 in int8 before the division: 41, not 127.
  CHECK(signedResult(signedInputs(ElementType::Int8, {127, 127, 127}), ReduceOp::Avg) == 41);
  CHECK(signedResult(signedInputs(ElementType::Int8, {-128, -128}), ReduceOp::Avg) == 0);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt32, {0xFFFFFFFFu, 1}), ReduceOp::Avg) == 0);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt32, {0xFFFFFFFFu, 0}), ReduceOp::Avg) == 0x7FFFFFFFu);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt8, {5, 2}), ReduceOp::Avg) == 3);
  // INT64_MIN + -1 wraps to INT64_MAX.
  CHECK(signedResult(signedInputs(ElementType::Int64, {kInt64Min, -1}), ReduceOp::Avg) == kInt64Max / 2);
  CHECK(unsignedResult(unsignedInputs(ElementType::UInt64, {kUInt64Max, kUInt64Max, kUInt64Max}), ReduceOp::Avg) ==
        (kUInt64Max - 2) / 3);

  // Exact means exact: one unit off is wrong.
  // (2^63 - 1) + (2^63 - 3) = 2^64 - 4: -4.
  const auto inputs = signedInputs(ElementType::Int64, {kInt64Max, kInt64Max - 2});
  CHECK(acceptsBits(inputs, ReduceOp::Sum, static_cast<std::uint64_t>(-4)));
  CHECK_FALSE(acceptsBits(inputs, ReduceOp::Sum, static_cast<std::uint64_t>(-3)));
  CHECK_FALSE(acceptsBits(inputs, ReduceOp::Sum, static_cast<std::uint64_t>(-5)));
}

TEST_CASE("HostBuffer keeps integers exact: 64-bit values, signed and unsigned views", "[reference]") {
  HostBuffer buffer{ElementType::UInt64, std::vector<std::uint8_t>(16)};
  buffer.setUInt(0, kUInt64Max - 1);
  CHECK(buffer.uintAt(0) == kUInt64Max - 1);
  CHECK(buffer.bitsAt(0) == kUInt64Max - 1);
  HostBuffer small{ElementType::Int8, std::vector<std::uint8_t>(2)};
  small.setInt(0, -1);
  small.setInt(1, 300);  // modulo 256: 44
  CHECK(small.intAt(0) == -1);
  CHECK(small.bitsAt(0) == 0xFF);
  CHECK(small.intAt(1) == 44);
  CHECK(small.at(0) == -1.0);
  HostBuffer u8{ElementType::UInt8, std::vector<std::uint8_t>(1)};
  u8.set(0, 255);
  CHECK(u8.intAt(0) == 255);
  CHECK(u8.at(0) == 255.0);
  HostBuffer i32{ElementType::Int32, std::vector<std::uint8_t>(4)};
  i32.set(0, -2147483648.0);
  CHECK(i32.intAt(0) == -2147483648ll);
  CHECK(integerMinBits(ElementType::Int32) == 0x80000000u);
  CHECK(integerMaxBits(ElementType::Int32) == 0x7FFFFFFFu);
  CHECK(integerMaxBits(ElementType::UInt64) == kUInt64Max);
  CHECK(integerMinBits(ElementType::UInt8) == 0);
}

TEST_CASE("fp8: the decoder agrees with cuda_fp8.h on all 256 codes of both kinds", "[reference]") {
  for (ElementType type : {ElementType::Float8E4M3, ElementType::Float8E5M2}) {
    const __nv_fp8_interpretation_t kind = type == ElementType::Float8E4M3 ? __NV_E4M3 : __NV_E5M2;
    for (int code = 0; code < 256; ++code) {
      const double mine = fp8ToDouble(static_cast<std::uint8_t>(code), type);
      const double theirs =
          __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), kind)));
      CAPTURE(elementTypeName(type), code, mine, theirs);
      if (std::isnan(theirs)) {
        CHECK(std::isnan(mine));
      } else {
        CHECK(mine == theirs);
        CHECK(std::signbit(mine) == std::signbit(theirs));
        // Every number encodes back to itself (infinities saturate instead: below).
        if (!std::isinf(mine)) CHECK(fp8FromDouble(mine, type) == code);
      }
    }
  }
  const FloatFormat e4m3 = floatFormat(ElementType::Float8E4M3);
  const FloatFormat e5m2 = floatFormat(ElementType::Float8E5M2);
  CHECK(fp8ToDouble(0x7E, ElementType::Float8E4M3) == e4m3.maxFinite);
  CHECK(fp8ToDouble(0x01, ElementType::Float8E4M3) == e4m3.minSubnormal);
  CHECK(fp8ToDouble(0x7B, ElementType::Float8E5M2) == e5m2.maxFinite);
  CHECK(fp8ToDouble(0x01, ElementType::Float8E5M2) == e5m2.minSubnormal);
  CHECK(std::isinf(fp8ToDouble(0x7C, ElementType::Float8E5M2)));
}

TEST_CASE("fp8: the encoder rounds to nearest even and saturates as __NV_SATFINITE", "[reference]") {
  const ElementType e4m3 = ElementType::Float8E4M3, e5m2 = ElementType::Float8E5M2;
  // e4m3 around 1: 1.0 (0x38), 1.125 (0x39), 1.25 (0x3A).
  CHECK(fp8FromDouble(1.0625, e4m3) == 0x38);           // tie: to the even 1.0
  CHECK(fp8FromDouble(1.0625 + 1e-9, e4m3) == 0x39);    // just above the tie
  CHECK(fp8FromDouble(1.1875, e4m3) == 0x3A);           // tie: to the even 1.25
  CHECK(fp8FromDouble(-1.1875, e4m3) == 0xBA);
  // e5m2 around 1: 1.0 (0x3C), 1.25 (0x3D), 1.5 (0x3E).
  CHECK(fp8FromDouble(1.125, e5m2) == 0x3C);
  CHECK(fp8FromDouble(1.375, e5m2) == 0x3E);
  // Subnormals: half the smallest one is a tie to the even zero.
  CHECK(fp8FromDouble(std::ldexp(1.0, -10), e4m3) == 0x00);
  CHECK(fp8FromDouble(std::ldexp(1.5, -10), e4m3) == 0x01);
  // Saturation: beyond the largest finite value, infinities included.
  CHECK(fp8FromDouble(448, e4m3) == 0x7E);
  CHECK(fp8FromDouble(500, e4m3) == 0x7E);
  CHECK(fp8FromDouble(1e30, e4m3) == 0x7E);
  CHECK(fp8FromDouble(INFINITY, e4m3) == 0x7E);
  CHECK(fp8FromDouble(-INFINITY, e4m3) == 0xFE);
  CHECK(fp8FromDouble(60000, e5m2) == 0x7B);
  CHECK(fp8FromDouble(INFINITY, e5m2) == 0x7B);
  CHECK(fp8FromDouble(-INFINITY, e5m2) == 0xFB);
  CHECK(std::isnan(fp8ToDouble(fp8FromDouble(NAN, e4m3), e4m3)));
  CHECK(std::isnan(fp8ToDouble(fp8FromDouble(NAN, e5m2), e5m2)));
  CHECK(fp8FromDouble(-0.0, e4m3) == 0x80);
  // Poison: 0xFF is NaN in both.
  CHECK(std::isnan(fp8ToDouble(0xFF, e4m3)));
  CHECK(std::isnan(fp8ToDouble(0xFF, e5m2)));
}

TEST_CASE("floating reference: one accumulation, then one rounding to nearest even", "[reference]") {
  const ElementType fp16 = ElementType::Float16, bf16 = ElementType::BFloat16, fp32 = ElementType::Float32;
  const ElementType fp64 = ElementType::Float64, e4m3 = ElementType::Float8E4M3, e5m2 = ElementType::Float8E5M2;
  SECTION("the rounding is to nearest: a truncating kernel fails") {
    // fp16: 1 + 3/4 ulp rounds up to 1 + 2^-10.
    const auto sum16 = floatInputs(fp16, {1.0, std::ldexp(1.0, -11) + std::ldexp(1.0, -12)});
    CHECK(accepts(sum16, ReduceOp::Sum, 1.0 + std::ldexp(1.0, -10)));
    CHECK_FALSE(accepts(sum16, ReduceOp::Sum, 1.0));
    CHECK(accepts(floatInputs(fp16, {1.0, std::ldexp(1.0, -11)}), ReduceOp::Sum, 1.0));  // the tie's even side
    const auto sum16b = floatInputs(bf16, {1.0, std::ldexp(1.0, -8) + std::ldexp(1.0, -9)});
    CHECK(accepts(sum16b, ReduceOp::Sum, 1.0 + std::ldexp(1.0, -7)));
    CHECK_FALSE(accepts(sum16b, ReduceOp::Sum, 1.0));
    // e4m3: 1 + 1/16 is a tie (to 1.0); 1.125 + 1/16 a tie to the even 1.25.
    CHECK(accepts(floatInputs(e4m3, {1.0, 0.0625}), ReduceOp::Sum, 1.0));
    CHECK_FALSE(accepts(floatInputs(e4m3, {1.0, 0.0625}), ReduceOp::Sum, 1.25));
    CHECK(accepts(floatInputs(e4m3, {1.125, 0.0625}), ReduceOp::Sum, 1.25));
    CHECK_FALSE(accepts(floatInputs(e4m3, {1.125, 0.0625}), ReduceOp::Sum, 1.0));
    CHECK(accepts(floatInputs(e5m2, {1.0, 0.25, 0.125}), ReduceOp::Sum, 1.5));  // 1.375: tie to 1.5
    CHECK_FALSE(accepts(floatInputs(e5m2, {1.0, 0.25, 0.125}), ReduceOp::Sum, 1.0));
    // fp64 accumulates in fp64: 1 + 2^-53 is a tie to 1.0; three ulps off is wrong.
    const auto sum64 = floatInputs(fp64, {1.0, std::ldexp(1.0, -53)});
    CHECK(accepts(sum64, ReduceOp::Sum, 1.0));
    CHECK_FALSE(accepts(sum64, ReduceOp::Sum, 1.0 + std::ldexp(1.0, -50)));
  }
  SECTION("fp32 accumulation error is allowed, no more") {
    // 1 + 2^-24 + 2^-24: fp32 may lose both small terms (1.0) or keep them (1 + 2^-23).
    const auto sum = floatInputs(fp32, {1.0, std::ldexp(1.0, -24), std::ldexp(1.0, -24)});
    CHECK(accepts(sum, ReduceOp::Sum, 1.0));
    CHECK(accepts(sum, ReduceOp::Sum, 1.0 + std::ldexp(1.0, -23)));
    CHECK_FALSE(accepts(sum, ReduceOp::Sum, 1.0 + std::ldexp(1.0, -20)));
    CHECK(accepts(floatInputs(fp32, {1.0, 2.0}), ReduceOp::Avg, 1.5));
    CHECK_FALSE(accepts(floatInputs(fp32, {1.0, 2.0}), ReduceOp::Avg, 3.0));
    CHECK(accepts(floatInputs(fp16, {1.5, 1.5}), ReduceOp::Prod, 2.25));
    CHECK_FALSE(accepts(floatInputs(fp16, {1.5, 1.5}), ReduceOp::Prod, 2.25 + std::ldexp(1.0, -9)));
  }
  SECTION("saturation (fp8) and overflow (the others)") {
    CHECK(accepts(floatInputs(e4m3, {448, 448}), ReduceOp::Sum, 448));
    CHECK_FALSE(accepts(floatInputs(e4m3, {448, 448}), ReduceOp::Sum, 416));
    CHECK_FALSE(acceptsBits(floatInputs(e4m3, {448, 448}), ReduceOp::Sum, 0x7F));  // NaN
    CHECK(accepts(floatInputs(e4m3, {-448, -448, -448}), ReduceOp::Avg, -448));
    CHECK(accepts(floatInputs(e5m2, {INFINITY, 1.0}), ReduceOp::Sum, 57344));
    CHECK_FALSE(accepts(floatInputs(e5m2, {INFINITY, 1.0}), ReduceOp::Sum, INFINITY));
    CHECK(accepts(floatInputs(e5m2, {-INFINITY, 1.0}), ReduceOp::Max, 1.0));
    CHECK(accepts(floatInputs(e5m2, {INFINITY, -INFINITY}), ReduceOp::Sum, NAN));
    CHECK_FALSE(accepts(floatInputs(e5m2, {INFINITY, -INFINITY}), ReduceOp::Sum, 57344));
    CHECK(accepts(floatInputs(fp16, {65504, 65504}), ReduceOp::Sum, INFINITY));
    CHECK_FALSE(accepts(floatInputs(fp16, {65504, 65504}), ReduceOp::Sum, 65504));
    CHECK(accepts(floatInputs(fp16, {65504, 8}), ReduceOp::Sum, 65504));  // below 65520: no overflow
    CHECK_FALSE(accepts(floatInputs(fp16, {65504, 8}), ReduceOp::Sum, INFINITY));
    CHECK(accepts(floatInputs(fp16, {65504, 16}), ReduceOp::Sum, INFINITY));  // the tie overflows
    const double bf16Max = std::ldexp(255.0, 120);
    CHECK(accepts(floatInputs(bf16, {bf16Max, bf16Max}), ReduceOp::Sum, INFINITY));
    CHECK_FALSE(accepts(floatInputs(fp16, {-65504, -65504}), ReduceOp::Sum, INFINITY));
    CHECK(accepts(floatInputs(fp16, {-65504, -65504}), ReduceOp::Sum, -INFINITY));
  }
  SECTION("NaN, infinities and zeros: Sum and Prod propagate NaN, Min and Max ignore it") {
    CHECK(accepts(floatInputs(fp32, {NAN, 1.0}), ReduceOp::Sum, NAN));
    CHECK_FALSE(accepts(floatInputs(fp32, {NAN, 1.0}), ReduceOp::Sum, 1.0));
    CHECK(accepts(floatInputs(fp32, {NAN, 0.0}), ReduceOp::Prod, NAN));
    CHECK(accepts(floatInputs(fp32, {INFINITY, 0.0}), ReduceOp::Prod, NAN));
    CHECK(accepts(floatInputs(fp32, {INFINITY, -2.0}), ReduceOp::Prod, -INFINITY));
    CHECK_FALSE(accepts(floatInputs(fp32, {INFINITY, -2.0}), ReduceOp::Prod, INFINITY));
    CHECK(accepts(floatInputs(fp32, {INFINITY, 1.0}), ReduceOp::Avg, INFINITY));
    CHECK(accepts(floatInputs(fp32, {NAN, 1.0}), ReduceOp::Min, 1.0));
    CHECK_FALSE(accepts(floatInputs(fp32, {NAN, 1.0}), ReduceOp::Min, NAN));
    CHECK(accepts(floatInputs(bf16, {2.0, NAN, NAN}), ReduceOp::Max, 2.0));
    CHECK(accepts(floatInputs(fp16, {NAN, NAN}), ReduceOp::Max, NAN));
    CHECK_FALSE(accepts(floatInputs(fp16, {NAN, NAN}), ReduceOp::Max, 0.0));
    CHECK(accepts(floatInputs(fp32, {-INFINITY, NAN}), ReduceOp::Max, -INFINITY));
    CHECK(accepts(floatInputs(fp64, {-0.0, 0.0}), ReduceOp::Min, 0.0));
    CHECK(accepts(floatInputs(fp64, {-0.0, 0.0}), ReduceOp::Min, -0.0));
    // Push kernels send -0.0 as +0.0: a zero's sign is free.
    CHECK(accepts(floatInputs(fp16, {-0.0, -0.0}), ReduceOp::Sum, 0.0));
    // Min and Max are exact: the neighbour is wrong.
    const auto pair = floatInputs(fp32, {1.0, 1.0 + std::ldexp(1.0, -23)});
    CHECK(accepts(pair, ReduceOp::Max, 1.0 + std::ldexp(1.0, -23)));
    CHECK_FALSE(accepts(pair, ReduceOp::Max, 1.0));
    CHECK(accepts(floatInputs(e4m3, {-448, 0.001953125}), ReduceOp::Min, -448));
  }
  SECTION("Min and Max of subnormals: the value picked, or a flushed zero; never another input") {
    const double tiny = floatFormat(fp32).minSubnormal;
    const auto subnormals = floatInputs(fp32, {tiny, 3 * tiny});
    CHECK(accepts(subnormals, ReduceOp::Max, 3 * tiny));
    CHECK(accepts(subnormals, ReduceOp::Max, 0.0));  // flushed
    CHECK(accepts(subnormals, ReduceOp::Max, -0.0));
    CHECK_FALSE(accepts(subnormals, ReduceOp::Max, tiny));  // the other rank's
    CHECK_FALSE(accepts(subnormals, ReduceOp::Max, 2 * tiny));
    CHECK_FALSE(accepts(subnormals, ReduceOp::Min, 3 * tiny));
    const double tinyBf16 = floatFormat(bf16).minSubnormal;
    CHECK(accepts(floatInputs(bf16, {-tinyBf16, tinyBf16}), ReduceOp::Min, -tinyBf16));
    CHECK_FALSE(accepts(floatInputs(bf16, {-tinyBf16, tinyBf16}), ReduceOp::Min, tinyBf16));
    // Normal in the fp32 accumulation: never flushed.
    const double tiny16 = floatFormat(fp16).minSubnormal;
    CHECK(accepts(floatInputs(fp16, {tiny16, 2 * tiny16}), ReduceOp::Max, 2 * tiny16));
    CHECK_FALSE(accepts(floatInputs(fp16, {tiny16, 2 * tiny16}), ReduceOp::Max, 0.0));
    const double tiny8 = floatFormat(e4m3).minSubnormal;
    CHECK_FALSE(accepts(floatInputs(e4m3, {tiny8, -tiny8}), ReduceOp::Min, 0.0));
    CHECK(accepts(floatInputs(fp64, {std::ldexp(1.0, -1070), 1.0}), ReduceOp::Min, std::ldexp(1.0, -1070)));
    CHECK_FALSE(accepts(floatInputs(fp64, {std::ldexp(1.0, -1070), 1.0}), ReduceOp::Min, std::ldexp(1.0, -1069)));
    // The poison (all bits set) is NaN in every floating type: never a finite result.
    for (ElementType type : kFloatingTypes) {
      CAPTURE(elementTypeName(type));
      CHECK_FALSE(acceptsBits(floatInputs(type, {0.5, 0.25}), ReduceOp::Sum, ~std::uint64_t{0}));
    }
  }
}

TEST_CASE("the output's poison is no right answer, NaN expected or not", "[reference]") {
  Random random(7);
  for (ElementType type : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      CAPTURE(elementTypeName(type), reduceOpName(op));
      const std::size_t count = 4096;
      const std::vector<HostBuffer> inputs = isFloating(type) ? specialInputs(type, op, count, 3, random)
                                                              : std::vector<HostBuffer>{randomInputs(type, op, count, random),
                                                                                        randomInputs(type, op, count, random)};
      const std::vector<Expected> expected = expectedResults(inputs, op);
      CHECK(countMismatches(expected, wrongAnswers(expected, type), nullptr) == count);
    }
  }
  // Where all ones is right, all zeros.
  const Expected nan = expectedResults(floatInputs(ElementType::Float16, {NAN, 1.0}), ReduceOp::Sum)[0];
  CHECK(wrongAnswerBits(nan, ElementType::Float16) == 0);
  const Expected allOnes = expectedResults(unsignedInputs(ElementType::UInt8, {255, 0}), ReduceOp::Sum)[0];
  CHECK(wrongAnswerBits(allOnes, ElementType::UInt8) == 0);
  CHECK(wrongAnswerBits(expectedResults(unsignedInputs(ElementType::UInt8, {1, 0}), ReduceOp::Sum)[0],
                        ElementType::UInt8) == 0xFF);
}

TEST_CASE("countMismatches counts and describes; the sum-only form is the Sum op", "[reference]") {
  std::vector<HostBuffer> inputs;
  for (double base : {1.0, 2.0}) {
    inputs.push_back(HostBuffer{ElementType::Float32, std::vector<std::uint8_t>(12)});
    for (std::size_t i = 0; i < 3; ++i) inputs.back().set(i, base + static_cast<double>(i));
  }
  HostBuffer out{ElementType::Float32, std::vector<std::uint8_t>(12)};
  out.set(0, 3);
  out.set(1, 5);
  out.set(2, 6);  // should be 7
  std::string first;
  CHECK(countMismatches(inputs, out, &first) == 1);
  CHECK(first.find("element 2") != std::string::npos);
  CHECK(countMismatches(inputs, out, ReduceOp::Sum, nullptr) == 1);
  CHECK(countMismatches(inputs, out, ReduceOp::Max, nullptr) == 3);  // 2, 3, 4 expected

  std::vector<HostBuffer> ints = signedInputs(ElementType::Int32, {-5, 3});
  HostBuffer result{ElementType::Int32, std::vector<std::uint8_t>(4)};
  result.setInt(0, -2);
  first.clear();
  CHECK(countMismatches(ints, result, ReduceOp::Sum, &first) == 0);
  CHECK(countMismatches(ints, result, ReduceOp::Avg, &first) == 1);  // -1
  CHECK(first.find("-1 (0xffffffff)") != std::string::npos);
}

TEST_CASE("random inputs per (type, op) keep every reference meaningful", "[reference]") {
  Random random(99);
  constexpr int kRanks = 8;
  constexpr std::size_t kCount = 4096;
  for (ElementType type : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      CAPTURE(elementTypeName(type), reduceOpName(op));
      std::vector<HostBuffer> inputs;
      for (int r = 0; r < kRanks; ++r) inputs.push_back(randomInputs(type, op, kCount, random));
      const std::vector<Expected> expected = expectedResults(inputs, op);
      std::size_t nonFinite = 0, saturated = 0, extremes = 0, small = 0;
      for (std::size_t i = 0; i < kCount; ++i) {
        if (isInteger(type)) {
          const std::uint64_t bits = inputs[0].bitsAt(i);
          extremes += bits == integerMinBits(type) || bits == integerMaxBits(type);
          continue;
        }
        nonFinite += !std::isfinite(expected[i].value);
        saturated += std::fabs(expected[i].value) > floatFormat(type).maxFinite;
        const double x = std::fabs(inputs[0].at(i));
        small += x < 0.75 || x > 1.25;
        extremes += x == floatFormat(type).maxFinite || x == floatFormat(type).minSubnormal;
      }
      // Ordinary inputs: no NaN, no infinity, nothing beyond the type's range in any result.
      CHECK(nonFinite == 0);
      CHECK(saturated == 0);
      if (op == ReduceOp::Prod && !isInteger(type)) CHECK(small == 0);  // near 1 in magnitude
      if (op != ReduceOp::Prod && (op == ReduceOp::Min || op == ReduceOp::Max || isInteger(type))) {
        CHECK(extremes > kCount / 32);
      }
    }
  }
  // Integer sums wrap: index 0 holds the maximum on every rank.
  std::vector<HostBuffer> inputs;
  for (int r = 0; r < 2; ++r) inputs.push_back(randomInputs(ElementType::Int32, ReduceOp::Sum, 17, random));
  CHECK(expectedElement(inputs, 0, ReduceOp::Sum).bits == 0xFFFFFFFEu);
}

namespace {

// A host stand-in for a kernel that keeps the contract: each element accumulated over the
// ranks in fp32 (fp64 for fp64) in one of several orders, then rounded once to the type.
enum class Order { Forward, Backward, Tree, Rotated };

template <typename Acc>
Acc combine(ReduceOp op, Acc a, Acc b) {
  switch (op) {
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Min: return std::fmin(a, b);
    case ReduceOp::Max: return std::fmax(a, b);
    default: return a + b;
  }
}

template <typename Acc>
Acc reduceTree(ReduceOp op, const std::vector<Acc>& values, std::size_t begin, std::size_t end) {
  if (end - begin == 1) return values[begin];
  const std::size_t middle = begin + (end - begin) / 2;
  return combine(op, reduceTree(op, values, begin, middle), reduceTree(op, values, middle, end));
}

template <typename Acc>
Acc reduceInOrder(ReduceOp op, std::vector<Acc> values, Order order, std::size_t element) {
  const std::size_t n = values.size();
  if (order == Order::Tree) return reduceTree(op, values, 0, n);
  if (order == Order::Backward) std::reverse(values.begin(), values.end());
  if (order == Order::Rotated) std::rotate(values.begin(), values.begin() + static_cast<long>(element % n), values.end());
  Acc result = values[0];
  for (std::size_t r = 1; r < n; ++r) result = combine(op, result, values[r]);
  return result;
}

// `truncate`: a broken kernel that rounds toward zero; `inType`: one that accumulates in the
// element type itself (rounding after every step).
HostBuffer emulateKernel(const std::vector<HostBuffer>& inputs, ReduceOp op, Order order, bool divideByReciprocal,
                         bool inType = false) {
  const ElementType type = inputs.front().type;
  HostBuffer out{type, std::vector<std::uint8_t>(inputs.front().bytes.size())};
  const std::size_t n = inputs.size();
  for (std::size_t i = 0; i < out.count(); ++i) {
    if (type == ElementType::Float64) {
      std::vector<double> values;
      for (const HostBuffer& input : inputs) values.push_back(input.at(i));
      double result = reduceInOrder(op == ReduceOp::Avg ? ReduceOp::Sum : op, values, order, i);
      if (op == ReduceOp::Avg) result = divideByReciprocal ? result * (1.0 / n) : result / n;
      out.set(i, result);
      continue;
    }
    std::vector<float> values;
    for (const HostBuffer& input : inputs) values.push_back(static_cast<float>(input.at(i)));
    float result = 0;
    if (inType) {
      HostBuffer step{type, std::vector<std::uint8_t>(elementBytes(type))};
      step.set(0, values[0]);
      for (std::size_t r = 1; r < n; ++r) step.set(0, combine(op, static_cast<float>(step.at(0)), values[r]));
      result = static_cast<float>(step.at(0));
    } else {
      result = reduceInOrder(op == ReduceOp::Avg ? ReduceOp::Sum : op, values, order, i);
    }
    if (op == ReduceOp::Avg) {
      result = divideByReciprocal ? result * (1.0f / static_cast<float>(n)) : result / static_cast<float>(n);
    }
    switch (type) {
      case ElementType::Float8E4M3:
        out.bytes[i] = __nv_cvt_float_to_fp8(result, __NV_SATFINITE, __NV_E4M3);
        break;
      case ElementType::Float8E5M2:
        out.bytes[i] = __nv_cvt_float_to_fp8(result, __NV_SATFINITE, __NV_E5M2);
        break;
      default: out.set(i, result); break;  // fp16, bf16: __float2half_rn, __float2bfloat16_rn
    }
  }
  return out;
}

}  // namespace

TEST_CASE("a host kernel that keeps the contract passes in every order; one that does not fails",
          "[reference]") {
  Random random(2026);
  for (int ranks : {2, 3, 8}) {
    for (ElementType type : kFloatingTypes) {
      for (ReduceOp op : kAllOps) {
        for (bool special : {false, true}) {
          std::vector<HostBuffer> inputs;
          if (special) {
            inputs = specialInputs(type, op, 2000, ranks, random);
          } else {
            for (int r = 0; r < ranks; ++r) inputs.push_back(randomInputs(type, op, 2000, random));
          }
          const std::vector<Expected> expected = expectedResults(inputs, op);
          for (Order order : {Order::Forward, Order::Backward, Order::Tree, Order::Rotated}) {
            for (bool reciprocal : {false, true}) {
              CAPTURE(ranks, elementTypeName(type), reduceOpName(op), special, static_cast<int>(order), reciprocal);
              std::string first;
              const std::size_t mismatches = countMismatches(expected, emulateKernel(inputs, op, order, reciprocal), &first);
              INFO(first);
              CHECK(mismatches == 0);
            }
          }
        }
      }
    }
  }
  // Accumulating in the element type breaks the contract, and the reference sees it.
  for (ElementType type : {ElementType::Float16, ElementType::BFloat16, ElementType::Float8E4M3}) {
    std::vector<HostBuffer> inputs;
    for (int r = 0; r < 8; ++r) inputs.push_back(randomInputs(type, ReduceOp::Sum, 2000, random));
    CAPTURE(elementTypeName(type));
    CHECK(countMismatches(inputs, emulateKernel(inputs, ReduceOp::Sum, Order::Forward, false, true), nullptr) > 0);
  }
}
