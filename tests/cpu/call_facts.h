// Calls for the policy's tests: a sum of `count` elements of `type`.
#pragma once

#include "policy.h"

namespace car::testing {

inline CallFacts sumOf(ElementType type, std::size_t count) {
  CallFacts call;
  call.type = type;
  call.op = ReduceOp::Sum;
  call.count = count;
  return call;
}

}  // namespace car::testing
