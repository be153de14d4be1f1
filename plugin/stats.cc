#include "stats.h"

#include <fmt/format.h>

namespace car {

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
  return fmt::format("taken 1stage={} 2stage={} ({} bytes) forwarded {}{}",
                     taken(Algorithm::OneStage), taken(Algorithm::TwoStage), takenBytes(),
                     forwardedTotal, reasons.empty() ? "" : " (" + reasons + ")");
}

}  // namespace car
