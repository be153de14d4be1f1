// 16-byte packs: the unit every thread loads, reduces and stores (one ld.128 / st.128).
// A pack holds 8 fp16/bf16 or 4 fp32 elements; the sum is accumulated in fp32 and rounded
// back to the element type once, so the order of additions is the only source of rounding.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace car {

struct alignas(16) Pack {
  uint4 bits;
};

template <typename T>
struct PackOf {
  static constexpr int kElems = 16 / sizeof(T);
  struct Accum {
    float lane[kElems];
  };
};

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half fromFloat<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T>
__device__ __forceinline__ void accumulate(typename PackOf<T>::Accum& sum, const Pack& pack,
                                           bool first) {
  const T* elems = reinterpret_cast<const T*>(&pack.bits);
#pragma unroll
  for (int i = 0; i < PackOf<T>::kElems; ++i) {
    sum.lane[i] = first ? toFloat(elems[i]) : sum.lane[i] + toFloat(elems[i]);
  }
}

template <typename T>
__device__ __forceinline__ Pack roundToPack(const typename PackOf<T>::Accum& sum) {
  Pack pack;
  T* elems = reinterpret_cast<T*>(&pack.bits);
#pragma unroll
  for (int i = 0; i < PackOf<T>::kElems; ++i) elems[i] = fromFloat<T>(sum.lane[i]);
  return pack;
}

// Sum of pack `index` over `sources` in the order given. All loads are issued before the
// first add (the loop is unrolled and the loads are independent), so the remote reads are
// in flight together.
template <typename T, int kRanks>
__device__ __forceinline__ Pack reducePacks(const Pack* const (&sources)[kRanks], long long index) {
  Pack loaded[kRanks];
#pragma unroll
  for (int r = 0; r < kRanks; ++r) loaded[r] = sources[r][index];
  typename PackOf<T>::Accum sum;
#pragma unroll
  for (int r = 0; r < kRanks; ++r) accumulate<T>(sum, loaded[r], r == 0);
  return roundToPack<T>(sum);
}

}  // namespace car
