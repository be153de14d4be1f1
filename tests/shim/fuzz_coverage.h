// What kinds of argument one thread's fuzzed all-reduces covered (driver scenario "fuzz"):
// every type and op, out-of-range values, null, stale and live communicators, every
// pointer alignment, zero, odd, huge and overflowing counts, in place, inside groups.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "call_log.h"

namespace shimtest {

class FuzzCoverage {
 public:
  // One all-reduce as NCCL saw it; `stale`: its communicator was destroyed before.
  void note(const Call& call, bool stale, bool inGroup);
  // Every kind the fuzz must reach that no noted call had.
  std::vector<std::string> missing() const;

 private:
  std::set<std::string> seen_;
};

}  // namespace shimtest
