// Calls for the policy's tests: a sum of `count` elements of `type`, or a call of another
// collective (`count` one rank's part, as NCCL counts it).
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

inline CallFacts callOf(Collective collective, ElementType type, std::size_t count) {
  CallFacts call = sumOf(type, count);
  call.collective = collective;
  if (!reduces(collective)) call.op.reset();  // an all-gather has none
  return call;
}

}  // namespace car::testing
