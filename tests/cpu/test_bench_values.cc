// car_nccl_bench's inputs and expected results (tests/bench/bench_values.h): the bench checks
// NCCL's result at every size exactly, so every input and result must be exact in its type,
// whatever order the ranks are combined in; and the inputs must be such that a reduction that
// left a rank out would be seen.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../bench/bench_values.h"
#include "all_reduce.h"

using namespace bench;

namespace {

constexpr std::size_t kElements = 600;

double rounded(const TypeInfo& type, double value) {
  unsigned char bytes[8];
  encode(type, value, bytes);
  return decode(type, bytes);
}

double combine(ncclRedOp_t op, double a, double b) {
  if (op == ncclProd) return a * b;
  if (op == ncclMin) return std::min(a, b);
  if (op == ncclMax) return std::max(a, b);
  return a + b;  // sum, avg
}

// One rank after another in `order`, rounding to the type after every step, as a ring passes
// partial results through memory; avg as NCCL does it for floating types: each input times
// 1/ranks (rounded) first.
double stepByStep(const TypeInfo& type, ncclRedOp_t op, const std::vector<double>& inputs,
                  const std::vector<int>& order) {
  const int ranks = static_cast<int>(inputs.size());
  const bool premultiply = op == ncclAvg && type.kind == Kind::Float;
  const double scale = premultiply ? rounded(type, 1.0 / ranks) : 1.0;
  double result = 0;
  for (std::size_t step = 0; step < order.size(); ++step) {
    const double input = premultiply ? rounded(type, inputs[order[step]] * scale) : inputs[order[step]];
    result = step == 0 ? input : rounded(type, combine(op, result, input));
  }
  if (op == ncclAvg && type.kind != Kind::Float) result = std::trunc(result / ranks);
  return result;
}

// All at once, then one rounding: avg divides the sum (our kernels' way).
double atOnce(const TypeInfo& type, ncclRedOp_t op, const std::vector<double>& inputs) {
  double result = inputs[0];
  for (std::size_t r = 1; r < inputs.size(); ++r) result = combine(op, result, inputs[r]);
  if (op == ncclAvg) result = type.kind == Kind::Float ? result / inputs.size() : std::trunc(result / inputs.size());
  return rounded(type, result);
}

std::vector<double> inputsAt(const TypeInfo& type, ncclRedOp_t op, int ranks, std::size_t i) {
  std::vector<double> inputs(ranks);
  for (int r = 0; r < ranks; ++r) inputs[r] = inputValue(type, op, r, ranks, i);
  return inputs;
}

}  // namespace

TEST_CASE("bench values: the bench's types and ops are the library's", "[bench-values]") {
  CHECK(std::size(kTypes) == static_cast<std::size_t>(car::kElementTypeCount));
  for (int t = 0; t < car::kElementTypeCount; ++t) {
    const auto type = static_cast<car::ElementType>(t);
    const std::string name = car::elementTypeName(type);
    CAPTURE(name);
    const auto* found = std::find_if(std::begin(kTypes), std::end(kTypes),
                                     [&](const TypeInfo& info) { return name == info.name; });
    REQUIRE(found != std::end(kTypes));
    CHECK(found->bytes == car::elementBytes(type));
  }
  CHECK(std::size(kOps) == static_cast<std::size_t>(car::kReduceOpCount));
  for (int o = 0; o < car::kReduceOpCount; ++o) {
    const std::string name = car::reduceOpName(static_cast<car::ReduceOp>(o));
    CAPTURE(name);
    CHECK(std::any_of(std::begin(kOps), std::end(kOps), [&](const OpInfo& info) { return name == info.name; }));
  }
}

TEST_CASE("bench values: every input and expected result is exact in its type", "[bench-values]") {
  for (const TypeInfo& type : kTypes) {
    for (const OpInfo& op : kOps) {
      for (int ranks = 2; ranks <= 8; ++ranks) {
        CAPTURE(type.name, op.name, ranks);
        int inexact = 0;
        for (std::size_t i = 0; i < kElements; ++i) {
          for (double input : inputsAt(type, op.op, ranks, i)) inexact += rounded(type, input) != input;
          const double expected = expectedValue(type, op.op, ranks, i);
          inexact += rounded(type, expected) != expected;
          if (type.kind == Kind::Unsigned) inexact += expected < 0;
        }
        CHECK(inexact == 0);
      }
    }
  }
}

TEST_CASE("bench values: any order of the ranks, either way of averaging, passes the check", "[bench-values]") {
  std::mt19937 random(12);
  for (const TypeInfo& type : kTypes) {
    for (const OpInfo& op : kOps) {
      for (int ranks = 2; ranks <= 8; ++ranks) {
        CAPTURE(type.name, op.name, ranks);
        const double allowed = tolerance(type, op.op, ranks);
        std::vector<int> order(ranks);
        int wrong = 0;
        for (std::size_t i = 0; i < kElements; ++i) {
          const std::vector<double> inputs = inputsAt(type, op.op, ranks, i);
          const double expected = expectedValue(type, op.op, ranks, i);
          wrong += !(std::fabs(atOnce(type, op.op, inputs) - expected) <= allowed);
          for (int shuffle = 0; shuffle < 4; ++shuffle) {
            std::iota(order.begin(), order.end(), 0);
            std::shuffle(order.begin(), order.end(), random);
            wrong += !(std::fabs(stepByStep(type, op.op, inputs, order) - expected) <= allowed);
          }
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("bench values: exact everywhere but averages of floating types over 3, 5, 6, 7 ranks", "[bench-values]") {
  for (const TypeInfo& type : kTypes) {
    for (const OpInfo& op : kOps) {
      for (int ranks = 2; ranks <= 8; ++ranks) {
        CAPTURE(type.name, op.name, ranks);
        const bool powerOfTwo = (ranks & (ranks - 1)) == 0;
        CHECK((tolerance(type, op.op, ranks) > 0) == (op.op == ncclAvg && type.kind == Kind::Float && !powerOfTwo));
      }
    }
  }
}

TEST_CASE("bench values: ranks hold different values, and a rank left out of the reduction is seen", "[bench-values]") {
  for (const TypeInfo& type : kTypes) {
    for (const OpInfo& op : kOps) {
      for (int ranks = 2; ranks <= 8; ++ranks) {
        if (tolerance(type, op.op, ranks) > 0) continue;  // within ulps, a small input is not seen
        CAPTURE(type.name, op.name, ranks);
        bool ranksDiffer = false;
        for (std::size_t i = 0; i < kElements; ++i) {
          const std::vector<double> inputs = inputsAt(type, op.op, ranks, i);
          ranksDiffer = ranksDiffer || std::count(inputs.begin(), inputs.end(), inputs[0]) != ranks;
        }
        CHECK(ranksDiffer);
        for (int left = 0; left < ranks; ++left) {
          CAPTURE(left);
          bool seen = false;
          for (std::size_t i = 0; i < kElements && !seen; ++i) {
            std::vector<double> inputs = inputsAt(type, op.op, ranks, i);
            inputs.erase(inputs.begin() + left);
            double result = inputs[0];
            for (std::size_t r = 1; r < inputs.size(); ++r) result = combine(op.op, result, inputs[r]);
            if (op.op == ncclAvg) result /= ranks;  // divided by the world size all the same
            seen = result != expectedValue(type, op.op, ranks, i);
          }
          CHECK(seen);
        }
      }
    }
  }
}

TEST_CASE("bench values: every pattern repeats after valuePeriod, so a table of one period serves any seed",
          "[bench-values]") {
  for (const TypeInfo& type : kTypes) {
    for (const OpInfo& op : kOps) {
      for (int ranks = 2; ranks <= 8; ++ranks) {
        CAPTURE(type.name, op.name, ranks);
        const unsigned period = valuePeriod(ranks);
        int differ = 0;
        for (std::size_t i = 0; i < period; ++i) {
          for (int r = 0; r < ranks; ++r)
            differ += inputValue(type, op.op, r, ranks, i) != inputValue(type, op.op, r, ranks, i + 3 * period);
          differ += expectedValue(type, op.op, ranks, i) != expectedValue(type, op.op, ranks, i + period);
        }
        CHECK(differ == 0);
        const std::vector<unsigned char> table = patternTable(type, op.op, 1, ranks);
        REQUIRE(table.size() == std::size_t{period} * type.bytes);
        CHECK(decode(type, &table[5 * type.bytes]) == inputValue(type, op.op, 1, ranks, 5));
      }
    }
  }
}

TEST_CASE("bench values: the next seed gives every rank other inputs, and sums other results", "[bench-values]") {
  for (const TypeInfo& type : kTypes) {
    for (const OpInfo& op : kOps) {
      for (int ranks = 2; ranks <= 8; ++ranks) {
        CAPTURE(type.name, op.name, ranks);
        const unsigned period = valuePeriod(ranks);
        for (int r = 0; r < ranks; ++r) {
          std::size_t changed = 0;
          for (std::size_t i = 0; i < period; ++i)
            changed += inputValue(type, op.op, r, ranks, i) != inputValue(type, op.op, r, ranks, i + 1);
          CAPTURE(r);
          CHECK(changed * 5 >= period);  // a fifth of the elements at least (unsigned products: 1 or 2)
        }
        if (op.op != ncclSum) continue;
        std::size_t changed = 0;
        for (std::size_t i = 0; i < period; ++i)
          changed += expectedValue(type, op.op, ranks, i) != expectedValue(type, op.op, ranks, i + 1);
        CHECK(changed * 2 >= period);  // a result of the previous call's data fails the check
      }
    }
  }
}

TEST_CASE("bench values: wrongElements counts errors at the call's own seed", "[bench-values]") {
  for (const TypeInfo& type : kTypes) {
    const int ranks = 4;
    const std::size_t count = 1000;
    const unsigned long long seed = 12345;
    std::vector<unsigned char> output(count * type.bytes);
    for (std::size_t i = 0; i < count; ++i)
      encode(type, expectedValue(type, ncclSum, ranks, i + seed), &output[i * type.bytes]);
    CAPTURE(type.name);
    CHECK(wrongElements(type, ncclSum, ranks, seed, output.data(), count) == 0);
    CHECK(wrongElements(type, ncclSum, ranks, seed + 1, output.data(), count) >= count / 2);
    for (std::size_t at : {std::size_t{0}, std::size_t{500}, count - 1})
      for (int b = 0; b < type.bytes; ++b) output[at * type.bytes + b] ^= 0xFF;
    CHECK(wrongElements(type, ncclSum, ranks, seed, output.data(), count) == 3);
  }
}

TEST_CASE("bench values: wrongCopies compares with one rank's input at the call's own seed", "[bench-values]") {
  for (const TypeInfo& type : kTypes) {
    const int ranks = 4, rank = 2;
    const std::size_t count = 1000;
    const unsigned long long seed = 777;
    std::vector<unsigned char> output(count * type.bytes);
    for (std::size_t i = 0; i < count; ++i)
      encode(type, inputValue(type, ncclSum, rank, ranks, i + seed), &output[i * type.bytes]);
    CAPTURE(type.name);
    CHECK(wrongCopies(type, ncclSum, rank, ranks, seed, output.data(), count) == 0);
    CHECK(wrongCopies(type, ncclSum, rank + 1, ranks, seed, output.data(), count) >= count / 2);  // another rank's block
    CHECK(wrongCopies(type, ncclSum, rank, ranks, seed + 1, output.data(), count) >= count / 2);  // the previous call's
    for (std::size_t at : {std::size_t{0}, std::size_t{500}, count - 1})
      for (int b = 0; b < type.bytes; ++b) output[at * type.bytes + b] ^= 0xFF;
    CHECK(wrongCopies(type, ncclSum, rank, ranks, seed, output.data(), count) == 3);
  }
}
