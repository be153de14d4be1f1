// Which all-reduces count as "on symmetric windows": both buffers wholly inside registered
// windows, until those are deregistered.
#include <catch2/catch.hpp>

#include "lifecycle/symmetric_windows.h"

using namespace car;

namespace {

const void* at(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }
ncclWindow_t handle(std::uintptr_t value) { return reinterpret_cast<ncclWindow_t>(value); }

}  // namespace

TEST_CASE("symmetric windows: both buffers must lie wholly inside registered windows", "[windows]") {
  SymmetricWindows windows;
  CHECK(windows.empty());
  CHECK_FALSE(windows.containBoth(at(0x1000), at(0x1000), 16));
  windows.add(handle(1), at(0x1000), 0x1000);  // [0x1000, 0x2000)
  windows.add(handle(2), at(0x8000), 0x100);   // [0x8000, 0x8100)
  CHECK(windows.containBoth(at(0x1000), at(0x1800), 0x800));     // in place at both ends
  CHECK(windows.containBoth(at(0x1000), at(0x8000), 0x100));     // send and receive in different windows
  CHECK_FALSE(windows.containBoth(at(0x1000), at(0x8000), 0x101));  // one byte past the second
  CHECK_FALSE(windows.containBoth(at(0x1f00), at(0x1000), 0x101));  // one byte past the first
  CHECK_FALSE(windows.containBoth(at(0x0ff0), at(0x1000), 0x10));   // starts before
  CHECK_FALSE(windows.containBoth(at(0x1000), at(0x4000), 0x10));   // receive buffer not a window
  windows.remove(handle(2));
  CHECK_FALSE(windows.containBoth(at(0x1000), at(0x8000), 0x10));
  CHECK(windows.containBoth(at(0x1000), at(0x1000), 0x1000));
  windows.remove(handle(1));
  CHECK(windows.empty());
}
