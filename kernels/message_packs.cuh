// The caller's buffers, read and written in packs: any byte count, any alignment.
// Pack i covers bytes [16 i, 16 i + 16) of the message. A full pack of a 16-byte aligned
// buffer moves as one vector; anything else (an unaligned buffer, the last partial pack)
// byte by byte, with zeros past the end, which are +0.0 in every floating type and never
// the sentinel.
#pragma once

#include <cstdint>

#include "packs.cuh"
#include "rank_signal.h"

namespace car {

__device__ __forceinline__ bool aligned16(const void* pointer) {
  return (reinterpret_cast<std::uintptr_t>(pointer) & (kPackBytes - 1)) == 0;
}

// The slow paths, byte by byte: an unaligned buffer or the last partial pack. Out of line on
// purpose: inlined at every call site they made the push kernels several times larger, and the
// larger kernels measured slower than these calls cost (docs/design.md, "Kernel code size").
// Built from bytes with shifts, not through a byte pointer into the pack, so the pack stays in
// registers.
static __device__ __noinline__ Pack loadPackByBytes(const void* message, long long begin, long long bytes) {
  std::uint32_t words[4] = {0u, 0u, 0u, 0u};
  const unsigned char* from = static_cast<const unsigned char*>(message) + begin;
#pragma unroll
  for (int k = 0; k < static_cast<int>(kPackBytes); ++k) {
    if (begin + k < bytes) words[k / 4] |= static_cast<std::uint32_t>(from[k]) << (8 * (k % 4));
  }
  Pack out;
  out.bits = make_uint4(words[0], words[1], words[2], words[3]);
  return out;
}

static __device__ __noinline__ void storePackByBytes(void* message, long long begin, long long bytes, Pack value) {
  const std::uint32_t words[4] = {value.bits.x, value.bits.y, value.bits.z, value.bits.w};
  unsigned char* to = static_cast<unsigned char*>(message) + begin;
#pragma unroll
  for (int k = 0; k < static_cast<int>(kPackBytes); ++k) {
    if (begin + k < bytes) to[k] = static_cast<unsigned char>(words[k / 4] >> (8 * (k % 4)));
  }
}

__device__ __forceinline__ Pack loadMessagePack(const void* message, long long pack, long long bytes,
                                                bool aligned) {
  const long long begin = pack * static_cast<long long>(kPackBytes);
  if (aligned && begin + static_cast<long long>(kPackBytes) <= bytes) {
    return static_cast<const Pack*>(message)[pack];
  }
  return loadPackByBytes(message, begin, bytes);
}

__device__ __forceinline__ void storeMessagePack(void* message, long long pack, long long bytes, bool aligned,
                                                 const Pack& value) {
  const long long begin = pack * static_cast<long long>(kPackBytes);
  if (aligned && begin + static_cast<long long>(kPackBytes) <= bytes) {
    static_cast<Pack*>(message)[pack] = value;
    return;
  }
  storePackByBytes(message, begin, bytes, value);
}

}  // namespace car
