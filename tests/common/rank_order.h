// The bits every kernel must return for a floating-point all-reduce, on the host
// (docs/design.md, "One result per element"): for each element, the ranks' values widened to
// the accumulation type (fp32; fp64 for fp64), combined in rank order 0, 1, ..., n - 1,
// divided by n for Avg, rounded once to the element type, and a zero result made +0.0 (fp64
// keeps the sign its arithmetic gives). Where host_data.h's reference accepts any order
// within a tolerance, this one fixes the order and asks for the bits, so a kernel whose
// result depends on the message size, the kernel or the grid differs from it somewhere.
//
// And the inputs that make a changed order show: values across many binades (sums round in
// fp32), products of full significands, zeros of both signs, NaN, infinities, subnormals and
// averages that round to -0.0.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "host_data.h"

namespace car::testing {

// The element-wise all-reduce of `inputs` (one buffer per rank, a floating type) by `op`,
// the ranks combined in the order `order` (a permutation of the ranks; the kernels' order is
// 0, 1, ..., n - 1). positiveZeros: make a zero result +0.0 in fp8, fp16, bf16 and fp32, as
// the kernels do; off, the sign the arithmetic gives stays.
HostBuffer combinedInOrder(const std::vector<HostBuffer>& inputs, ReduceOp op, const std::vector<int>& order,
                           bool positiveZeros = true);

// combinedInOrder in rank order, zeros positive: what every kernel returns.
HostBuffer rankOrderResult(const std::vector<HostBuffer>& inputs, ReduceOp op);

// 0, 1, ..., ranks - 1, started at `first`: the order a reduction that starts at rank
// `first` uses (2stage's owners did, before every kernel summed in rank order).
std::vector<int> rotatedOrder(int ranks, int first);

// Whether element i of a and b hold the same result: the same bits, except that any NaN
// matches any NaN (the GPU makes NaNs of its own) and, in fp64, a zero either zero.
bool sameResult(const HostBuffer& a, const HostBuffer& b, std::size_t i);

// Elements (of the first min(a.count(), b.count())) that are not sameResult, the first one
// described in *first.
std::size_t countDifferentResults(const HostBuffer& expected, const HostBuffer& got, std::string* first);

// `input` as the push kernels send it (kernels/lamport.cuh): every 32-bit word of the
// message that is 0x80000000 (a zero whose top element is -0.0) becomes 0. Types of up to 32
// bits only; fp64 and integers travel unchanged.
HostBuffer withoutSentinelWords(const HostBuffer& input);

// Every rank's inputs for the invariance tests: `count` elements of a floating `type`, drawn
// from `seed`, element by element: a shorter draw is a prefix of a longer one.
std::vector<HostBuffer> invarianceInputs(ElementType type, ReduceOp op, std::size_t count, int ranks,
                                         std::uint64_t seed);

}  // namespace car::testing
