#include "stats.h"

#include "log.h"

namespace car {

std::string CallStats::summary() const {
  std::array<NamedCount, kAlgorithmCount> taken{};
  int kernels = 0;
  // The push kernels first, as they take the calls by default; each family in table order.
  for (KernelFamily family : {KernelFamily::Push, KernelFamily::Pull}) {
    for (const AlgorithmSpec& spec : kAlgorithms) {
      if (spec.family == family) taken[kernels++] = {spec.name, this->taken(spec.algorithm)};
    }
  }
  std::array<NamedCount, static_cast<int>(ForwardReason::kCount)> reasons{};
  for (int i = 0; i < static_cast<int>(ForwardReason::kCount); ++i) {
    reasons[i] = {forwardReasonName(static_cast<ForwardReason>(i)), forwarded(static_cast<ForwardReason>(i))};
  }
  return logText(formatCallCounts, taken.data(), kernels, takenBytes(), reasons.data(), static_cast<int>(reasons.size()));
}

}  // namespace car
