#include "sweep_log.h"

#include <catch2/catch.hpp>

#include <sstream>

namespace car::testing {
namespace {

std::string shiftsText(const std::vector<std::size_t>& shifts) {
  std::ostringstream text;
  for (std::size_t i = 0; i < shifts.size(); ++i) text << (i ? "," : "") << shifts[i];
  return text.str();
}

}  // namespace

OpCall makeCall(Collective collective, ElementType type, ReduceOp op, std::size_t count, int ranks, int callIndex) {
  OpCall call;
  call.collective = collective;
  call.type = type;
  call.op = op;
  call.count = count;
  const int pattern = callIndex % 3;
  call.inPlace = (callIndex / 3) % 2 == 1;
  call.sendShift = shiftsFor(ranks, type, pattern, callIndex);
  call.recvShift = shiftsFor(ranks, type, pattern, callIndex + 7);
  return call;
}

std::vector<HostBuffer> drawInputs(const OpCall& call, int ranks, Random& random) {
  const std::size_t count = call.collective == Collective::ReduceScatter ? call.count * ranks : call.count;
  std::vector<HostBuffer> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(randomInputs(call.type, call.op, count, random));
  return inputs;
}

std::string describeCall(int ranks, const char* kernel, const OpCall& call) {
  std::ostringstream text;
  text << ranks << " ranks, " << collectiveName(call.collective) << " on " << kernel << ", "
       << elementTypeName(call.type);
  if (reduces(call.collective)) text << " " << reduceOpName(call.op);
  text << ", " << call.count << " elements (" << call.count * elementBytes(call.type) << " B), "
       << (call.inPlace ? "in place" : "out of place") << ", send at +[" << shiftsText(call.sendShift) << "]";
  if (!call.inPlace) text << ", recv at +[" << shiftsText(call.recvShift) << "]";
  return text.str();
}

bool FailureLog::check(const std::string& where, const OpCall& call, const OpOutcome& outcome,
                     std::optional<Algorithm> kernel, ForwardReason reason) {
  ++calls_;
  std::string failure;
  if (!outcome.problem.empty()) {
    failure = outcome.problem;
  } else if (!kernel) {
    if (!outcome.forwarded || outcome.reason != reason) {
      failure = std::string("the policy forwards it (") + forwardReasonName(reason) + "), but it was " +
                (outcome.forwarded ? std::string("forwarded: ") + forwardReasonName(outcome.reason) : "taken");
    }
  } else if (!outcome.launched) {
    failure = std::string("not taken: ") + forwardReasonName(outcome.reason);
  } else if (outcome.ran != *kernel) {
    failure = std::string("ran on ") + algorithmName(outcome.ran) + ", not on " + algorithmName(*kernel);
  }
  if (failure.empty() && outcome.launched) {
    if (outcome.mismatches != 0) {
      failure = std::to_string(outcome.mismatches) + " wrong elements; first: " + outcome.firstMismatch;
    } else if (outcome.differingRank >= 0) {
      failure = "rank " + std::to_string(outcome.differingRank) + "'s output differs from rank 0's";
    } else if (!outcome.damage.empty()) {
      failure = "wrote outside its output: " + outcome.damage;
    }
  }
  if (failure.empty()) return true;
  if (failures_++ < kShownInFull) FAIL_CHECK(where << ": " << failure);
  std::string combination = std::string(collectiveName(call.collective)) + " " + elementTypeName(call.type);
  if (reduces(call.collective)) combination += std::string(" ") + reduceOpName(call.op);
  ++perCombination_[combination];
  return false;
}

void FailureLog::report() {
  CHECK(calls_ > 0);
  if (failures_ == 0) return;
  std::ostringstream text;
  text << failures_ << " of " << calls_ << " calls failed; per collective, type and op:";
  for (const auto& [combination, count] : perCombination_) text << "\n  " << combination << ": " << count;
  FAIL_CHECK(text.str());
}

}  // namespace car::testing
