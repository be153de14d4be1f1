#include "exports/forward_target.h"

namespace car {

void* resolveForwardTarget(const char* name, ForwardEntry& entry, bool* noRealNccl) noexcept {
  try {
    const RealNccl* real = realNccl();
    *noRealNccl = real == nullptr;
    if (real == nullptr) return nullptr;
    void* symbol = realSymbol(real->handle, name);
    if (symbol == nullptr) {
      reportMissing(*real, name);
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
