// Where a forwarded NCCL function goes: the same function of the real NCCL, looked up once
// in the library realNccl() was resolved from. forwarders.cc keeps one entry per function.
#pragma once

#include <nccl.h>

#include <atomic>

#include "exports/real_nccl.h"

namespace car {

struct ForwardEntry {
  std::atomic<void*> target{nullptr};
};

// The first call of a forwarder: looks `name` up and fills the entry.
void* resolveForwardTarget(const char* name, ForwardEntry& entry, bool* noRealNccl) noexcept;

// The real `name`, or nullptr: there is no real NCCL (*noRealNccl set; realNccl() has logged
// it), or the real NCCL lacks `name` (an older NCCL; reportMissing names it once). Inline:
// after the first call a forwarder costs one load and one indirect call.
inline void* forwardTarget(const char* name, ForwardEntry& entry, bool* noRealNccl) noexcept {
  if (void* cached = entry.target.load(std::memory_order_acquire)) return cached;
  return resolveForwardTarget(name, entry, noRealNccl);
}

// What a forwarder returns when it has nowhere to go.
template <typename Result>
Result unavailableResult(bool noRealNccl);

template <>
inline ncclResult_t unavailableResult<ncclResult_t>(bool noRealNccl) {
  return noRealNccl ? kNoRealNccl : ncclInvalidUsage;
}

template <>
inline void unavailableResult<void>(bool) {}

template <>
inline const char* unavailableResult<const char*>(bool) {
  return "nccl-car: this NCCL function is not available (see the NCCL-CAR WARN line)";
}

}  // namespace car
