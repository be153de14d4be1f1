// A host-mapped word a gate kernel (check_kernels.h, launchGate) spins on until the host
// opens it: holds the program's work on a stream for as long as a test needs.
#pragma once

#include <cuda_runtime_api.h>

#include "rank_group.h"

namespace car::testing {

class Gate {
 public:
  Gate() {
    void* word = nullptr;
    CHECK_CUDA(cudaHostAlloc(&word, sizeof(int), cudaHostAllocMapped));
    word_ = static_cast<volatile int*>(word);
    *word_ = 0;
  }
  // Left allocated: a gate kernel stuck by a failed test must never read freed memory.
  ~Gate() { open(); }
  const volatile int* word() const { return word_; }
  void open() { __atomic_store_n(const_cast<int*>(word_), 1, __ATOMIC_SEQ_CST); }
  bool isOpen() const { return __atomic_load_n(const_cast<const int*>(word_), __ATOMIC_SEQ_CST) != 0; }

 private:
  volatile int* word_ = nullptr;
};

}  // namespace car::testing
