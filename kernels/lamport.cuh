// The push kernels' transport: 16-byte packs written straight into a peer's receive area and
// recognised there without any flag, because the area was filled with a sentinel that no
// pushed pack can hold.
//
// The sentinel is the 32-bit word 0x80000000 in every word of a pack. For fp32 it is -0.0;
// for fp16 and bf16 it is the pair (+0.0, -0.0); for fp8 four zeros, the top one negative;
// in every floating type it is a word of zeros with the sign bit of its top element set. A
// pusher replaces any such word by 0x0, that is -0.0 by +0.0, which changes no sum, product,
// minimum or maximum numerically, only the sign of a zero result, which every kernel makes
// +0.0 anyway (roundToPack, packs.cuh; NCCL may return -0.0 there). A receiver treats a
// pack as arrived when none of its four words is the sentinel. PTX splits a 16-byte vector
// access into four 32-bit accesses, so a word is either old or new, never torn; the pack may
// arrive word by word, and is used only once all four are new.
//
// Integer and fp64 data have no such spare value. Their packs travel split (WirePack<2>):
// each 32-bit word as two words holding 16 bits each, which can never be the sentinel. Twice
// the bytes, the same one-pass latency.
#pragma once

#include <cstdint>
#include <type_traits>

#include "message_packs.cuh"
#include "packs.cuh"

namespace car {

constexpr std::uint32_t kSentinelWord = 0x80000000u;

__device__ __forceinline__ std::uint32_t withoutSentinel(std::uint32_t word) {
  return word == kSentinelWord ? 0u : word;
}

// The pack as it may travel: every -0.0 that would look like the sentinel becomes +0.0.
__device__ __forceinline__ Pack sanitized(Pack pack) {
  pack.bits.x = withoutSentinel(pack.bits.x);
  pack.bits.y = withoutSentinel(pack.bits.y);
  pack.bits.z = withoutSentinel(pack.bits.z);
  pack.bits.w = withoutSentinel(pack.bits.w);
  return pack;
}

__device__ __forceinline__ bool arrived(const Pack& pack) {
  return pack.bits.x != kSentinelWord && pack.bits.y != kSentinelWord && pack.bits.z != kSentinelWord &&
         pack.bits.w != kSentinelWord;
}

__device__ __forceinline__ Pack sentinelPack() {
  Pack pack;
  pack.bits = make_uint4(kSentinelWord, kSentinelWord, kSentinelWord, kSentinelWord);
  return pack;
}

// A store into a peer's area over NVLink (or into our own). Weak: each pack is checked on
// its own, so neither order nor visibility with respect to other stores matters. No
// "memory" clobber: the compiler may move our other loads across it (more in flight).
__device__ __forceinline__ void pushPack(Pack* slot, const Pack& pack) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(slot), "r"(pack.bits.x), "r"(pack.bits.y),
               "r"(pack.bits.z), "r"(pack.bits.w));
}

// A load of our own area that the compiler may neither cache nor hoist out of a loop (it is
// volatile: every execution loads): peers write it. Its result is all that depends on it.
__device__ __forceinline__ Pack peekPack(const Pack* slot) {
  Pack pack;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(pack.bits.x), "=r"(pack.bits.y), "=r"(pack.bits.z), "=r"(pack.bits.w)
               : "l"(slot));
  return pack;
}

// One pack of data as it travels: kWire packs (1: as it is, made sentinel-free; 2: split
// into 16-bit halves). kWire comes from the element type (kWirePacksOf).
template <int kWire>
struct WirePack {
  Pack part[kWire];
};

template <typename T>
constexpr int kWirePacksOf = std::is_integral<T>::value || std::is_same<T, double>::value ? 2 : 1;

__device__ __forceinline__ uint4 spreadHalves(std::uint32_t low, std::uint32_t high) {
  return make_uint4(low & 0xFFFFu, low >> 16, high & 0xFFFFu, high >> 16);
}

__device__ __forceinline__ std::uint32_t joinHalves(std::uint32_t low16, std::uint32_t high16) {
  return low16 | high16 << 16;
}

// The value the receivers will decode, made safe to send: what a rank that also keeps it
// for itself (the 2shot owner) must store, so that every rank ends with the same bits.
template <int kWire>
__device__ __forceinline__ Pack wireSafe(const Pack& pack) {
  if constexpr (kWire == 1) return sanitized(pack);
  else return pack;
}

// `pack` must already be wireSafe.
template <int kWire>
__device__ __forceinline__ WirePack<kWire> encodeWire(const Pack& pack) {
  WirePack<kWire> wire;
  if constexpr (kWire == 1) {
    wire.part[0] = pack;
  } else {
    wire.part[0].bits = spreadHalves(pack.bits.x, pack.bits.y);
    wire.part[1].bits = spreadHalves(pack.bits.z, pack.bits.w);
  }
  return wire;
}

template <int kWire>
__device__ __forceinline__ Pack decodeWire(const WirePack<kWire>& wire) {
  if constexpr (kWire == 1) {
    return wire.part[0];
  } else {
    Pack pack;
    pack.bits = make_uint4(joinHalves(wire.part[0].bits.x, wire.part[0].bits.y),
                           joinHalves(wire.part[0].bits.z, wire.part[0].bits.w),
                           joinHalves(wire.part[1].bits.x, wire.part[1].bits.y),
                           joinHalves(wire.part[1].bits.z, wire.part[1].bits.w));
    return pack;
  }
}

// Wire pack `index` of a slot whose packs start at `slot` (kWire packs per data pack).
template <int kWire>
__device__ __forceinline__ void pushWire(Pack* slot, long long index, const WirePack<kWire>& wire) {
#pragma unroll
  for (int k = 0; k < kWire; ++k) pushPack(slot + index * kWire + k, wire.part[k]);
}

template <int kWire>
__device__ __forceinline__ WirePack<kWire> peekWire(const Pack* slot, long long index) {
  WirePack<kWire> wire;
#pragma unroll
  for (int k = 0; k < kWire; ++k) wire.part[k] = peekPack(slot + index * kWire + k);
  return wire;
}

template <int kWire>
__device__ __forceinline__ bool arrivedWire(const WirePack<kWire>& wire) {
  bool all = true;
#pragma unroll
  for (int k = 0; k < kWire; ++k) all = all && arrived(wire.part[k]);
  return all;
}

}  // namespace car
