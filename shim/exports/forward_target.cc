#include "exports/forward_target.h"

#include "log.h"

namespace car {

void* resolveForwardTarget(const char* name, ForwardEntry& entry, bool* noRealNccl) noexcept {
  try {
    const RealNccl* real = realNccl();
    *noRealNccl = real == nullptr;
    if (real == nullptr) return nullptr;
    void* symbol = realSymbol(real->handle, name);
    if (symbol == nullptr) {
      if (!entry.reportedMissing.exchange(true)) {
        CAR_WARN(-1, "{} is not in the real NCCL ({}, an older version?): it returns ncclInvalidUsage", name,
                 real->origin);
      }
      return nullptr;
    }
    // Every thread that races here finds the same address.
    entry.target.store(symbol, std::memory_order_release);
    return symbol;
  } catch (...) {
    *noRealNccl = true;  // out of memory while looking: answer as without a real NCCL
    return nullptr;
  }
}

}  // namespace car
