// Cross-rank synchronisation state of one rank, and the layout of the rank's buffer block.
// Plain C++ so host code can size and lay out the block without including CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "hard_limits.h"

namespace car {

// Receive areas of the push kernels, used in rotation: call k writes area k % 3 and clears
// area (k - 1) % 3 (docs/design.md, "Why three areas").
constexpr int kPushAreas = 3;

// 32-bit flags: byte-wide ones gave wrong results.
using FlagWord = std::uint32_t;

// One per rank, at the start of its buffer block. Owned as follows:
//   roundOf[b][p]      written and read only by this rank: block b, lane p's barrier count.
//   arrived[ph][b][p]  written by rank p's block b over NVLink, spun on by this rank.
// Two phases (ph = round % 2) because a fast rank can be one barrier ahead of a slow one,
// never two; a single flag would let round k+1 overwrite round k before it was seen.
struct Signal {
  alignas(128) FlagWord roundOf[kMaxBlocks][kMaxRanks];
  alignas(128) FlagWord arrived[2][kMaxBlocks][kMaxRanks];
};

// Where the push kernels of one rank are in their area rotation. Local to the rank: no peer
// reads or writes it. Every push call reads it first and advances it last.
//   areaOf[v]        the area the next push call uses; one copy per virtual block v, so that
//                    block b of a grid of G blocks reads only areaOf[b] and writes only the
//                    copies v = b, b + G, ... : no two blocks of one kernel touch one word,
//                    and all copies move together whatever the grid sizes of the calls.
//   dirty[a]         what the peers wrote into area a during the last call that used it:
//                    `slots` slots of `slotPacks` packs from the start of the area, slot s
//                    written by rank s % ranks (this rank's own slots stay untouched). The
//                    next call puts them back to the sentinel.
struct DirtySlots {
  std::uint64_t slotPacks;
  std::uint32_t slots;
  std::uint32_t unused;
};

struct PushState {
  alignas(128) std::uint32_t areaOf[kMaxPushBlocks];
  alignas(128) DirtySlots dirty[kPushAreas];
};

// Both structs start zeroed (area 0 next, nothing to clear) and cross no process boundary
// by value, but their sizes fix the block layout that every rank computes alike.
static_assert(std::is_trivially_copyable_v<Signal> && std::is_trivially_copyable_v<PushState>);
static_assert(kMaxRanks <= 32, "rank masks are 32-bit words");

// Buffer block of one rank, one cudaMalloc, one IPC handle:
//
//   +--------+-----------+-------------+-----------------+--------+--------+--------+
//   | Signal | PushState | tmp (M)     | staging (M)     | area 0 | area 1 | area 2 |
//   +--------+-----------+-------------+-----------------+--------+--------+--------+
//   ^ base   ^ pushState ^ tmpOffset   ^ stagingOffset   ^ areasOffset, each areaBytes
//
// tmp holds this rank's reduced shard in the 2stage kernel; staging holds the copy of the
// caller's input that the peers read (1stage, 2stage). The areas receive the peers' pushes
// (1shot, 2shot); areaBytes = 0 when the push kernels are switched off. Every region starts
// 256-byte aligned.
struct BlockLayout {
  std::size_t pushStateOffset = 0;
  std::size_t tmpOffset = 0;
  std::size_t stagingOffset = 0;
  std::size_t areasOffset = 0;
  std::size_t areaBytes = 0;
  std::size_t totalBytes = 0;
};

constexpr std::size_t roundUp(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// One push area holds what the largest push call writes into it: 2shot uses two regions
// (scatter, gather) of ranks x ceil(packs / ranks) packs each, at most 2 x (message + one pack
// per rank); 1shot fits whenever ranks x message does (the policy checks).
constexpr std::size_t pushAreaBytesFor(std::size_t pushMaxBytes) {
  if (pushMaxBytes == 0) return 0;
  return roundUp(2 * roundUp(pushMaxBytes, kPackBytes) + 2 * kMaxRanks * kPackBytes, 256);
}

constexpr BlockLayout layoutFor(std::size_t maxBytes, std::size_t pushMaxBytes) {
  BlockLayout layout;
  layout.pushStateOffset = roundUp(sizeof(Signal), 256);
  layout.tmpOffset = layout.pushStateOffset + roundUp(sizeof(PushState), 256);
  layout.stagingOffset = layout.tmpOffset + roundUp(maxBytes, 256);
  layout.areasOffset = layout.stagingOffset + roundUp(maxBytes, 256);
  layout.areaBytes = pushAreaBytesFor(pushMaxBytes);
  layout.totalBytes = layout.areasOffset + kPushAreas * layout.areaBytes;
  return layout;
}

}  // namespace car
