#include "stats.h"

#include "log.h"

namespace car {

void CallStats::mergeFrom(const CallStats& other) {
  for (int a = 0; a < kAlgorithmCount; ++a) taken_[a].fetch_add(other.taken_[a].load(std::memory_order_relaxed), std::memory_order_relaxed);
  for (int i = 0; i < static_cast<int>(ForwardReason::kCount); ++i) {
    forwarded_[i].fetch_add(other.forwarded_[i].load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  takenBytes_.fetch_add(other.takenBytes(), std::memory_order_relaxed);
}

std::string CallStats::summary() const {
  std::array<NamedCount, kAlgorithmCount> taken{};
  int kernels = 0;
  for (Algorithm algorithm : {Algorithm::OneShotPush, Algorithm::TwoShotPush, Algorithm::OneStage, Algorithm::TwoStage}) {
    taken[kernels++] = {algorithmName(algorithm), this->taken(algorithm)};
  }
  std::array<NamedCount, static_cast<int>(ForwardReason::kCount)> reasons{};
  for (int i = 0; i < static_cast<int>(ForwardReason::kCount); ++i) {
    reasons[i] = {forwardReasonName(static_cast<ForwardReason>(i)), forwarded(static_cast<ForwardReason>(i))};
  }
  return logText(formatCallCounts, taken.data(), kernels, takenBytes(), reasons.data(), static_cast<int>(reasons.size()));
}

}  // namespace car
