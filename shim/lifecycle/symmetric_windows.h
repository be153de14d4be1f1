// The buffers a communicator registered as NCCL symmetric windows (ncclCommWindowRegister
// with NCCL_WIN_COLL_SYMMETRIC), so that an all-reduce on them can go to NCCL's symmetric
// kernels where those are faster (NCCL_CAR_SYMMETRIC_NCCL_BYTES). Thread-safe.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace car {

class SymmetricWindows {
 public:
  void add(ncclWindow_t window, const void* base, std::size_t bytes);
  void remove(ncclWindow_t window);
  // Whether [a, a + bytes) and [b, b + bytes) each lie inside one registered window.
  bool containBoth(const void* a, const void* b, std::size_t bytes) const;
  bool empty() const;

 private:
  struct Window {
    ncclWindow_t handle;
    std::uintptr_t begin;
    std::uintptr_t end;
  };
  bool containsLocked(std::uintptr_t begin, std::size_t bytes) const;

  mutable std::mutex mutex_;
  std::vector<Window> windows_;
};

}  // namespace car
