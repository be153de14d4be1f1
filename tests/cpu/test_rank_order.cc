// The host model of what every kernel returns (tests/common/rank_order.h), and the reasoning
// behind the kernels' promise of one result per element (docs/design.md, "One result per
// element"), checked on the host:
// - the model is a correct all-reduce (host_data.h's reference, any order within a tolerance);
// - what the push kernels do to a -0.0 input changes nothing but the sign of a zero result,
//   and with the kernels' +0.0 for every zero result, not even that;
// - the invariance inputs make a changed order show: a reduction that starts at another rank
//   (as 2stage's owners once did) gives other bits for some elements at 3 ranks and more;
//   at 2 ranks no order can (addition and multiplication commute).
#include <catch2/catch.hpp>

#include <cmath>

#include "rank_order.h"

using namespace car;
using namespace car::testing;

namespace {

constexpr std::size_t kCount = 4096;
constexpr int kRankCounts[] = {2, 3, 5, 8};

std::uint64_t seedOf(ElementType type, ReduceOp op, int ranks) {
  return 1000 * static_cast<std::uint64_t>(type) + 10 * static_cast<std::uint64_t>(op) + static_cast<std::uint64_t>(ranks);
}

bool upTo32Bits(ElementType type) { return type != ElementType::Float64; }

// Elements where `a` and `b` differ in more than the sign of a zero.
std::size_t differingBeyondZeroSign(const HostBuffer& a, const HostBuffer& b) {
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.count(); ++i) {
    if (sameResult(a, b, i) || (a.at(i) == 0 && b.at(i) == 0)) continue;
    ++differing;
  }
  return differing;
}

}  // namespace

TEST_CASE("rank-order model: a correct all-reduce of the invariance inputs", "[invariance]") {
  for (ElementType type : kFloatingTypes) {
    for (ReduceOp op : kAllOps) {
      for (int ranks : kRankCounts) {
        CAPTURE(elementTypeName(type), reduceOpName(op), ranks);
        const std::vector<HostBuffer> inputs = invarianceInputs(type, op, kCount, ranks, seedOf(type, op, ranks));
        std::string first;
        CHECK(countMismatches(inputs, rankOrderResult(inputs, op), op, &first) == 0);
        CAPTURE(first);
      }
    }
  }
}

TEST_CASE("rank-order model: no zero result is -0.0 below fp64, and a shorter draw is a prefix", "[invariance]") {
  for (ElementType type : kFloatingTypes) {
    for (ReduceOp op : kAllOps) {
      CAPTURE(elementTypeName(type), reduceOpName(op));
      const std::vector<HostBuffer> inputs = invarianceInputs(type, op, kCount, 4, seedOf(type, op, 4));
      const HostBuffer result = rankOrderResult(inputs, op);
      std::size_t zeros = 0, negativeZeros = 0;
      for (std::size_t i = 0; i < result.count(); ++i) {
        if (result.at(i) != 0) continue;
        ++zeros;
        negativeZeros += std::signbit(result.at(i));
      }
      CHECK(zeros > 0);
      if (upTo32Bits(type)) CHECK(negativeZeros == 0);

      const std::vector<HostBuffer> shorter = invarianceInputs(type, op, 100, 4, seedOf(type, op, 4));
      for (int r = 0; r < 4; ++r) {
        CHECK(std::equal(shorter[r].bytes.begin(), shorter[r].bytes.end(), inputs[r].bytes.begin()));
      }
    }
  }
}

TEST_CASE("rank-order model: the push kernels' +0.0 for an input -0.0 reaches only a zero's sign", "[invariance]") {
  for (ElementType type : kFloatingTypes) {
    if (!upTo32Bits(type)) continue;  // fp64 travels unchanged
    for (ReduceOp op : kAllOps) {
      for (int ranks : kRankCounts) {
        CAPTURE(elementTypeName(type), reduceOpName(op), ranks);
        const std::vector<HostBuffer> inputs = invarianceInputs(type, op, kCount, ranks, seedOf(type, op, ranks));
        std::vector<HostBuffer> sent;
        for (const HostBuffer& input : inputs) sent.push_back(withoutSentinelWords(input));
        const std::vector<int> order = rotatedOrder(ranks, 0);
        // As the arithmetic gives it: the pull kernels' inputs and the push kernels' differ
        // in zero signs only...
        const HostBuffer pulled = combinedInOrder(inputs, op, order, /*positiveZeros=*/false);
        const HostBuffer pushed = combinedInOrder(sent, op, order, /*positiveZeros=*/false);
        CHECK(differingBeyondZeroSign(pulled, pushed) == 0);
        // ... and making every zero result +0.0, as every kernel does, leaves no difference.
        std::string first;
        CHECK(countDifferentResults(combinedInOrder(inputs, op, order), combinedInOrder(sent, op, order), &first) == 0);
        CAPTURE(first);
        // Without that rule the kernels would differ: the draw holds sentinel words on some
        // ranks, and where every rank has one, the top element sums to -0.0, or +0.0 once sent.
        if (op == ReduceOp::Sum) CHECK(countDifferentResults(pulled, pushed, nullptr) > 0);
      }
    }
  }
}

TEST_CASE("rank-order model: the invariance inputs show a reduction started at another rank", "[invariance]") {
  for (ElementType type : kFloatingTypes) {
    for (ReduceOp op : kAllOps) {
      for (int ranks : kRankCounts) {
        CAPTURE(elementTypeName(type), reduceOpName(op), ranks);
        const std::vector<HostBuffer> inputs = invarianceInputs(type, op, kCount, ranks, seedOf(type, op, ranks));
        const HostBuffer inRankOrder = rankOrderResult(inputs, op);
        const HostBuffer startedAtOne = combinedInOrder(inputs, op, rotatedOrder(ranks, 1));
        const std::size_t differing = countDifferentResults(inRankOrder, startedAtOne, nullptr);
        // Min and max do not depend on the order; a and b commute, so 2 ranks cannot either.
        // e4m3 sums are exact in fp32: no order can show. Products of fp8, fp16 and bf16 round
        // in fp32 far below the type's own precision, and the one rounding to the type hides
        // the order unless a product falls within 2^-13 of the type's rounding boundary, which
        // random inputs do not hit: those are left out (the order is the same code for every
        // type, and fp32 and fp64 products show it).
        const bool orderFree = op == ReduceOp::Min || op == ReduceOp::Max || ranks == 2;
        const bool hidden = (type == ElementType::Float8E4M3 && op != ReduceOp::Prod) ||
                            (op == ReduceOp::Prod && type != ElementType::Float32 && type != ElementType::Float64);
        if (orderFree) {
          CHECK(differing == 0);
        } else if (!hidden) {
          CHECK(differing > 0);
        }
      }
    }
  }
}
