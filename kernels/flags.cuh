// Loads and stores of one barrier flag. Which pair to use depends on one question: was the
// data the flag announces written by this same kernel?
//  - No (the staging copy or an earlier kernel wrote it): the kernel boundary already made
//    the data visible system-wide; the flag only counts arrivals. volatile suffices: it
//    forces the access to happen, with no ordering cost.
//  - Yes (2stage's tmp shard, or the staging that a kernel filled itself from the caller's
//    input): the flag store must not overtake the data on its way to a peer GPU, so release
//    on the store and acquire on the load, at system scope because the observer is another
//    device.
// Ranks that copy in the kernel and ranks that copy before it may take part in one call:
// the plain Entry barrier therefore ends with one acquire load of the flag it saw, which
// pairs with a kernel-copying peer's release store (barrier.cuh).
#pragma once

#include <cstdint>

#include "rank_signal.h"

namespace car {

__device__ __forceinline__ void storeFlagVolatile(FlagWord* flag, FlagWord value) {
  asm volatile("st.volatile.global.u32 [%1], %0;" ::"r"(value), "l"(flag) : "memory");
}

__device__ __forceinline__ FlagWord loadFlagVolatile(const FlagWord* flag) {
  FlagWord value;
  asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

__device__ __forceinline__ void storeFlagRelease(FlagWord* flag, FlagWord value) {
  asm volatile("st.release.sys.global.u32 [%1], %0;" ::"r"(value), "l"(flag) : "memory");
}

__device__ __forceinline__ FlagWord loadFlagAcquire(const FlagWord* flag) {
  FlagWord value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

}  // namespace car
