// What the GPU sweeps share: how one call of a sweep is made and described, its inputs drawn,
// and a log that checks each outcome and reports the failures of thousands of calls without
// burying a pattern under them (tests/gpu/test_ops.cc, test_collectives.cc).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "host_data.h"
#include "op_runner.h"

namespace car::testing {

// The i-th call of a sweep: in place every other pair of triples, its offsets cycling through
// aligned, element-aligned and byte-aligned.
OpCall makeCall(Collective collective, ElementType type, ReduceOp op, std::size_t count, int ranks, int callIndex);
inline OpCall makeCall(ElementType type, ReduceOp op, std::size_t count, int ranks, int callIndex) {
  return makeCall(Collective::AllReduce, type, op, count, ranks, callIndex);
}

// Every rank's send buffer for `call`: inputs drawn for its op (host_data.h, randomInputs),
// a reduce-scatter's ranks x count elements, else count.
std::vector<HostBuffer> drawInputs(const OpCall& call, int ranks, Random& random);
inline std::vector<HostBuffer> drawInputs(ElementType type, ReduceOp op, std::size_t count, int ranks,
                                          Random& random) {
  OpCall call;
  call.type = type;
  call.op = op;
  call.count = count;
  return drawInputs(call, ranks, random);
}

std::string describeCall(int ranks, const char* kernel, const OpCall& call);

// Collects what went wrong over a sweep of thousands of calls: the first failures in full,
// then a count per (op, type), so that a missing kernel does not bury the report.
class FailureLog {
 public:
  static constexpr int kShownInFull = 40;

  // Checks one outcome: taken by `kernel` (nullopt: forwarded with `reason`), right, identical
  // on every rank where the ranks' outputs are one, nothing else written. Returns whether it
  // passed.
  bool check(const std::string& where, const OpCall& call, const OpOutcome& outcome, std::optional<Algorithm> kernel,
             ForwardReason reason = ForwardReason::kCount);
  // Fails once more with the count per (type, op) when there were failures; checks that the
  // sweep ran at all.
  void report();
  int calls() const { return calls_; }

 private:
  int calls_ = 0;
  int failures_ = 0;
  std::map<std::string, int> perCombination_;
};

}  // namespace car::testing
