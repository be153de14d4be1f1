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
  std::string taken;
  for (Algorithm algorithm : {Algorithm::OneShotPush, Algorithm::TwoShotPush, Algorithm::OneStage, Algorithm::TwoStage}) {
    taken += fmt::format(" {}={}", algorithmName(algorithm), this->taken(algorithm));
  }
  return fmt::format("taken{} ({} bytes) forwarded {}{}", taken, takenBytes(), forwardedTotal,
                     reasons.empty() ? "" : " (" + reasons + ")");
}

}  // namespace car
