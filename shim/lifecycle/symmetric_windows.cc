#include "lifecycle/symmetric_windows.h"

#include <algorithm>

namespace car {

void SymmetricWindows::add(ncclWindow_t window, const void* base, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(base);
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.push_back(Window{window, begin, begin + bytes});
}

void SymmetricWindows::remove(ncclWindow_t window) {
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.erase(std::remove_if(windows_.begin(), windows_.end(),
                                [window](const Window& w) { return w.handle == window; }),
                 windows_.end());
}

bool SymmetricWindows::containsLocked(std::uintptr_t begin, std::size_t bytes) const {
  return std::any_of(windows_.begin(), windows_.end(), [&](const Window& w) {
    return begin >= w.begin && begin <= w.end && bytes <= w.end - begin;
  });
}

bool SymmetricWindows::containBoth(const void* a, const void* b, std::size_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return containsLocked(reinterpret_cast<std::uintptr_t>(a), bytes) &&
         containsLocked(reinterpret_cast<std::uintptr_t>(b), bytes);
}

bool SymmetricWindows::empty() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return windows_.empty();
}

}  // namespace car
