// The design's hard limits, for host and device code alike. Plain C++ (no CUDA headers).
#pragma once

#include <cstddef>

namespace car {

// World sizes we take. One rank has nothing to exchange; above 8 the peer tables, the
// instantiated kernels and the handshake's rank masks would all have to grow.
constexpr int kMinRanks = 2;
constexpr int kMaxRanks = 8;

constexpr bool takesWorldSize(int ranks) { return ranks >= kMinRanks && ranks <= kMaxRanks; }

// Pull kernels: the barrier has exactly one arrival flag per (block, rank), so a grid larger
// than kMaxBlocks would have none. Not a tuning knob.
constexpr int kMaxBlocks = 36;
// Push kernels have no barrier; kMaxPushBlocks only sizes PushState::areaOf.
constexpr int kMaxPushBlocks = 256;
constexpr int kThreadsPerBlock = 512;

// Every kernel moves data in 16-byte packs (one vector load or store per thread).
constexpr std::size_t kPackBytes = 16;

}  // namespace car
