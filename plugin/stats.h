// What one communicator did with its all-reduces: printed at destroy at INFO.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "../kernels/all_reduce.h"
#include "policy.h"

namespace car {

class CallStats {
 public:
  void countTaken(Algorithm algorithm, std::size_t bytes) {
    taken_[static_cast<int>(algorithm)].fetch_add(1, std::memory_order_relaxed);
    takenBytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void countForwarded(ForwardReason reason) {
    forwarded_[static_cast<int>(reason)].fetch_add(1, std::memory_order_relaxed);
  }
  // A forwarded call NCCL refused is not one of the communicator's calls after all.
  void uncountForwarded(ForwardReason reason) {
    forwarded_[static_cast<int>(reason)].fetch_sub(1, std::memory_order_relaxed);
  }
  std::uint64_t taken(Algorithm algorithm) const {
    return taken_[static_cast<int>(algorithm)].load(std::memory_order_relaxed);
  }
  std::uint64_t forwarded(ForwardReason reason) const {
    return forwarded_[static_cast<int>(reason)].load(std::memory_order_relaxed);
  }
  std::uint64_t takenBytes() const { return takenBytes_.load(std::memory_order_relaxed); }

  // "taken 1shot=9 2shot=2 1stage=0 2stage=1 (1572864 bytes) forwarded 4 (op=1 too-large=3)"
  std::string summary() const;

 private:
  std::array<std::atomic<std::uint64_t>, kAlgorithmCount> taken_{};
  std::array<std::atomic<std::uint64_t>, static_cast<int>(ForwardReason::kCount)> forwarded_{};
  std::atomic<std::uint64_t> takenBytes_{0};
};

}  // namespace car
