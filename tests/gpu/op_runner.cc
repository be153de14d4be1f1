#include "op_runner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace car::testing {
namespace {

// The bytes around every buffer: a kernel must leave them as they were. Not compared with
// any result, so any pattern does.
constexpr std::uint8_t kGuardByte = 0xA5;

// A receive buffer's image for an out-of-place call: `shift` guard bytes, then `wrong` (the
// output's elements, each no right answer: host_data.h, wrongAnswers).
HostBuffer poisonedOutput(const HostBuffer& wrong, std::size_t shift) {
  HostBuffer image{wrong.type, std::vector<std::uint8_t>(shift, kGuardByte)};
  image.bytes.insert(image.bytes.end(), wrong.bytes.begin(), wrong.bytes.end());
  return image;
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
  // The reference first: out of place, every element of the output starts as no right
  // answer, so that one the kernel never wrote cannot pass for a result (a uniform poison
  // could: all ones is the NaN that a NaN input makes right, and for integers a value like
  // any other).
  const std::vector<Expected> expected = expectedResults(inputs, call.op);
  const HostBuffer wrong = call.inPlace ? HostBuffer{call.type, {}} : wrongAnswers(expected, call.type);
  const std::uint8_t poison = kGuardByte;
  in_.poison(poison);
  out_.poison(poison);
  std::vector<std::vector<std::uint8_t>> images(ranks_);
  std::vector<const void*> send(ranks_);
  std::vector<void*> recv(ranks_);
  for (int r = 0; r < ranks_; ++r) {
    images[r].assign(call.sendShift[r], poison);
    images[r].insert(images[r].end(), inputs[r].bytes.begin(), inputs[r].bytes.end());
    in_.upload(r, HostBuffer{call.type, images[r]});
    if (!call.inPlace) out_.upload(r, poisonedOutput(wrong, call.recvShift[r]));
    send[r] = static_cast<const std::uint8_t*>(in_.at(r)) + call.sendShift[r];
    recv[r] = call.inPlace ? static_cast<std::uint8_t*>(in_.at(r)) + call.sendShift[r]
                           : static_cast<std::uint8_t*>(out_.at(r)) + call.recvShift[r];
  }

  std::vector<SubmitResult> results;
  int launched = 0;
  for (int r = 0; r < ranks_; ++r) {
    CollectiveCall submitted;
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
