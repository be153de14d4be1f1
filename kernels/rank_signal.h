// Cross-rank synchronisation state of one rank, and the layout of the rank's buffer block.
// Plain C++ so host code can size and lay out the block without including CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace car {

// Hard limits of the design. kMaxBlocks is not a tuning knob: the barrier has exactly
// one flag slot per (block, rank), so a grid larger than this would have no slots.
constexpr int kMaxRanks = 8;
constexpr int kMaxBlocks = 36;
constexpr int kThreadsPerBlock = 512;
constexpr std::size_t kPackBytes = 16;

// 32-bit flags: byte-wide flags produced garbage results in the field (see DESIGN.md).
using FlagWord = std::uint32_t;

// One per rank, at the start of its buffer block. Owned as follows:
//   roundOf[b][p]      written and read only by this rank: block b, lane p's barrier count.
//   arrived[ph][b][p]  written by rank p's block b over NVLink, spun on by this rank.
// Two phases (ph = round % 2) because a fast rank can be one barrier ahead of a slow one,
// never two; a single slot would let round k+1 overwrite round k before it was seen.
struct Signal {
  alignas(128) FlagWord roundOf[kMaxBlocks][kMaxRanks];
  alignas(128) FlagWord arrived[2][kMaxBlocks][kMaxRanks];
};

// Buffer block of one rank, one cudaMalloc, one IPC handle:
//
//   +--------+---------------------+---------------------+
//   | Signal | tmp (maxBytes)      | staging (maxBytes)  |
//   +--------+---------------------+---------------------+
//   ^ base   ^ base + tmpOffset    ^ base + stagingOffset
//
// tmp holds this rank's reduced shard in the 2stage kernel; staging holds the copy of
// the caller's input that the peers read. Both regions start 256-byte aligned.
struct BlockLayout {
  std::size_t tmpOffset = 0;
  std::size_t stagingOffset = 0;
  std::size_t totalBytes = 0;
};

constexpr std::size_t roundUp(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

constexpr BlockLayout layoutForMaxBytes(std::size_t maxBytes) {
  BlockLayout layout;
  layout.tmpOffset = roundUp(sizeof(Signal), 256);
  layout.stagingOffset = layout.tmpOffset + roundUp(maxBytes, 256);
  layout.totalBytes = layout.stagingOffset + roundUp(maxBytes, 256);
  return layout;
}

}  // namespace car
