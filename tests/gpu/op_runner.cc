#include "op_runner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace car::testing {
namespace {

// A poison byte whose pattern (every byte of an element equal to it) is a right answer for as
// few elements as possible, judged on a sample: an element the kernel never wrote must not
// pass for a result. 0xFF is NaN in every floating type; integers take any pattern as a value.
std::uint8_t choosePoison(const std::vector<Expected>& expected, ElementType type) {
  static constexpr std::uint8_t kCandidates[] = {0xFF, 0xA5, 0x5A, 0xC3, 0x3C, 0x96, 0x69};
  HostBuffer probe{type, std::vector<std::uint8_t>(elementBytes(type))};
  const std::size_t stride = std::max<std::size_t>(1, expected.size() / 4096);
  std::uint8_t best = kCandidates[0];
  std::size_t bestHits = ~std::size_t{0};
  for (std::uint8_t candidate : kCandidates) {
    std::fill(probe.bytes.begin(), probe.bytes.end(), candidate);
    std::size_t hits = 0;
    for (std::size_t i = 0; i < expected.size() && hits < bestHits; i += stride) {
      hits += matches(expected[i], type, probe, 0);
    }
    if (hits < bestHits) {
      best = candidate;
      bestHits = hits;
    }
    if (hits == 0) break;
  }
  return best;
}

std::string hexByte(std::uint8_t byte) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", byte);
  return text;
}

// The first byte of `got` in [begin, end) that is not `poison`, described; empty if none.
std::string firstChanged(const std::vector<std::uint8_t>& got, std::size_t begin, std::size_t end,
                         std::uint8_t poison, const char* where) {
  for (std::size_t b = begin; b < end && b < got.size(); ++b) {
    if (got[b] != poison) return std::string("byte ") + std::to_string(b) + " " + where + " is " + hexByte(got[b]);
  }
  return {};
}

}  // namespace

std::vector<std::size_t> shiftsFor(int ranks, ElementType type, int pattern, int salt) {
  std::vector<std::size_t> shifts(ranks, 0);
  const std::size_t size = static_cast<std::size_t>(elementBytes(type));
  for (int r = 0; r < ranks; ++r) {
    const std::size_t step = static_cast<std::size_t>(r + salt);
    if (pattern == 1) shifts[r] = (step % 4) * size % OpRunner::kMaxShift;
    // 5 is odd: 5 r covers every residue modulo 16, so no two ranks (at most 8) share one.
    if (pattern == 2) shifts[r] = (5 * static_cast<std::size_t>(r) + 3 * static_cast<std::size_t>(salt) + 1) % OpRunner::kMaxShift;
  }
  return shifts;
}

double hangSeconds() {
  const char* text = std::getenv("CAR_GPU_TEST_HANG_SECONDS");
  const double seconds = text != nullptr ? std::atof(text) : 0;
  return seconds > 0 ? seconds : 60;
}

OpRunner::OpRunner(int device, int ranks, std::function<Config(int)> configOfRank, std::size_t maxMessageBytes)
    : device_(device),
      ranks_(ranks),
      configOfRank_(std::move(configOfRank)),
      group_(std::make_unique<RankGroup>(device, ranks, configOfRank_)),
      in_(ranks, maxMessageBytes + kMaxShift + kGuardBytes),
      out_(ranks, maxMessageBytes + kMaxShift + kGuardBytes) {}

OpRunner::~OpRunner() = default;

void OpRunner::abortGroup() {
  for (int r = 0; r < ranks_; ++r) group_->engine(r).raiseAbort();
  bool idle = true;
  for (int r = 0; r < ranks_; ++r) idle = group_->engine(r).waitIdleWithin(hangSeconds()) && idle;
  if (!idle) {
    // A kernel that ignores the abort: destroying the group would wait for it forever.
    std::fprintf(stderr, "a kernel did not stop after the abort; its group is leaked\n");
    group_.release();
  }
  group_ = std::make_unique<RankGroup>(device_, ranks_, configOfRank_);
}

OpOutcome OpRunner::run(const OpCall& call, const std::vector<HostBuffer>& inputs) {
  OpOutcome outcome;
  const std::size_t bytes = call.count * static_cast<std::size_t>(elementBytes(call.type));
  if (bytes + kMaxShift + kGuardBytes > in_.bytes() || static_cast<int>(inputs.size()) != ranks_ ||
      static_cast<int>(call.sendShift.size()) != ranks_ || (!call.inPlace && static_cast<int>(call.recvShift.size()) != ranks_)) {
    outcome.problem = "the test's own call does not fit its buffers";
    return outcome;
  }
  // The reference first: the poison is chosen not to look like a right answer.
  const std::vector<Expected> expected = expectedResults(inputs, call.op);
  const std::uint8_t poison = choosePoison(expected, call.type);
  in_.poison(poison);
  out_.poison(poison);
  std::vector<std::vector<std::uint8_t>> images(ranks_);
  std::vector<const void*> send(ranks_);
  std::vector<void*> recv(ranks_);
  for (int r = 0; r < ranks_; ++r) {
    images[r].assign(call.sendShift[r], poison);
    images[r].insert(images[r].end(), inputs[r].bytes.begin(), inputs[r].bytes.end());
    in_.upload(r, HostBuffer{call.type, images[r]});
    send[r] = static_cast<const std::uint8_t*>(in_.at(r)) + call.sendShift[r];
    recv[r] = call.inPlace ? static_cast<std::uint8_t*>(in_.at(r)) + call.sendShift[r]
                           : static_cast<std::uint8_t*>(out_.at(r)) + call.recvShift[r];
  }

  std::vector<SubmitResult> results;
  int launched = 0;
  for (int r = 0; r < ranks_; ++r) {
    AllReduceCall submitted;
    submitted.send = send[r];
    submitted.recv = recv[r];
    submitted.count = call.count;
    submitted.type = call.type;
    submitted.op = call.op;
    submitted.stream = group_->stream(r);
    results.push_back(group_->engine(r).submit(submitted));
    launched += results.back().launched;
  }
  if (launched == 0) {
    outcome.forwarded = true;
    outcome.reason = results[0].reason;
    for (int r = 1; r < ranks_; ++r) {
      if (results[r].reason != results[0].reason) outcome.problem = "the ranks forwarded for different reasons";
    }
    if (results[0].reason == ForwardReason::Failed) {
      outcome.problem = std::string("the launch failed: ") + cudaGetErrorString(results[0].error);
    }
    return outcome;
  }
  if (launched < ranks_) {
    for (int r = 0; r < ranks_ && outcome.problem.empty(); ++r) {
      if (!results[r].launched) {
        outcome.problem = "only " + std::to_string(launched) + " of " + std::to_string(ranks_) + " ranks launched; rank " +
                          std::to_string(r) + ": " + forwardReasonName(results[r].reason) +
                          (results[r].error != cudaSuccess ? std::string(" ") + cudaGetErrorString(results[r].error) : "");
      }
    }
    abortGroup();
    return outcome;
  }
  outcome.ran = results[0].algorithm;
  for (int r = 1; r < ranks_; ++r) {
    if (results[r].algorithm != results[0].algorithm) {
      outcome.problem = "the ranks ran different kernels";
      abortGroup();
      return outcome;
    }
  }
  for (int r = 0; r < ranks_; ++r) {
    if (!group_->engine(r).waitIdleWithin(hangSeconds())) {
      outcome.problem = "hung: rank " + std::to_string(r) + " not done within " + std::to_string(hangSeconds()) + " s";
      abortGroup();
      return outcome;
    }
  }
  group_->synchronize();
  outcome.launched = true;

  std::vector<std::uint8_t> first;
  for (int r = 0; r < ranks_; ++r) {
    const DeviceBuffers& result = call.inPlace ? in_ : out_;
    const std::size_t shift = call.inPlace ? call.sendShift[r] : call.recvShift[r];
    const std::size_t span = std::min(result.bytes(), shift + bytes + kGuardBytes);
    const std::vector<std::uint8_t> got = result.read(r, 0, span);
    std::string changed = firstChanged(got, 0, shift, poison, "before the output");
    if (changed.empty()) changed = firstChanged(got, shift + bytes, span, poison, "after the output");
    if (!changed.empty() && outcome.damage.empty()) outcome.damage = "rank " + std::to_string(r) + ": " + changed;
    HostBuffer output{call.type, std::vector<std::uint8_t>(got.begin() + static_cast<long>(shift),
                                                           got.begin() + static_cast<long>(shift + bytes))};
    if (r == 0) {
      outcome.mismatches = countMismatches(expected, output, &outcome.firstMismatch);
      first = std::move(output.bytes);
    } else if (output.bytes != first && outcome.differingRank < 0) {
      outcome.differingRank = r;
    }
    if (!call.inPlace) {
      const std::size_t inputSpan = std::min(in_.bytes(), call.sendShift[r] + bytes + kGuardBytes);
      const std::vector<std::uint8_t> input = in_.read(r, 0, inputSpan);
      if (!std::equal(images[r].begin(), images[r].end(), input.begin()) ||
          !firstChanged(input, images[r].size(), inputSpan, poison, "").empty()) {
        if (outcome.damage.empty()) outcome.damage = "rank " + std::to_string(r) + ": its input changed";
      }
    }
  }
  return outcome;
}

}  // namespace car::testing
