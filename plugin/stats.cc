#include "stats.h"

#include <fmt/format.h>

namespace car {

void CallStats::mergeFrom(const CallStats& other) {
  for (int a = 0; a < kAlgorithmCount; ++a) taken_[a].fetch_add(other.taken_[a].load(std::memory_order_relaxed), std::memory_order_relaxed);
  for (int i = 0; i < static_cast<int>(ForwardReason::kCount); ++i) {
    forwarded_[i].fetch_add(other.forwarded_[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  takenBytes_.fetch_add(other.takenBytes(), std::memory_order_relaxed);
}

std::string CallStats::summary() const {
  std::uint64_t forwardedTotal = 0;
  std::string reasons;
  for (int i = 0; i < static_cast<int>(ForwardReason::kCount); ++i) {
    const std::uint64_t n = forwarded(static_cast<ForwardReason>(i));
    if (n == 0) continue;
    forwardedTotal += n;
    reasons += fmt::format("{}{}={}", reasons.empty() ? "" : " ",
                           forwardReasonName(static_cast<ForwardReason>(i)), n);
  }
  std::string taken;
  // The push kernels first, as they take the calls by default; each family in table order.
  for (KernelFamily family : {KernelFamily::Push, KernelFamily::Pull}) {
    for (const AlgorithmSpec& spec : kAlgorithms) {
      if (spec.family == family) taken += fmt::format(" {}={}", spec.name, this->taken(spec.algorithm));
    }
  }
  return fmt::format("taken{} ({} bytes) forwarded {}{}", taken, takenBytes(), forwardedTotal,
                     reasons.empty() ? "" : " (" + reasons + ")");
}

}  // namespace car
