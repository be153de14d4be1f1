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

std::string hexByte(std::uint8_t byte) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", byte);
  return text;
}

// The first byte of `got` outside [skipBegin, skipEnd) that is not as it was: `before`, and
// `poison` past its end. Described; empty if none.
std::string firstChanged(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& before,
                         std::uint8_t poison, std::size_t skipBegin, std::size_t skipEnd) {
  for (std::size_t b = 0; b < got.size(); ++b) {
    if (b >= skipBegin && b < skipEnd) continue;
    const std::uint8_t was = b < before.size() ? before[b] : poison;
    if (got[b] != was) {
      const char* where = b < skipBegin ? "before the output" : skipEnd > skipBegin ? "after the output" : "";
      return "byte " + std::to_string(b) + " " + where + (*where ? " " : "") + "is " + hexByte(got[b]) + ", was " +
             hexByte(was);
    }
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
  const std::size_t size = static_cast<std::size_t>(elementBytes(call.type));
  const std::size_t blockBytes = call.count * size;  // the smaller of a rank's input and output
  const std::size_t sendBytes = blockBytes * (call.collective == Collective::ReduceScatter ? ranks_ : 1);
  const std::size_t recvBytes = blockBytes * (call.collective == Collective::AllGather ? ranks_ : 1);
  bool fits = std::max(sendBytes, recvBytes) + kMaxShift + kGuardBytes <= in_.bytes() &&
              static_cast<int>(inputs.size()) == ranks_ && static_cast<int>(call.sendShift.size()) == ranks_ &&
              (call.inPlace || static_cast<int>(call.recvShift.size()) == ranks_);
  for (const HostBuffer& input : inputs) fits = fits && input.bytes.size() == sendBytes;
  if (!fits) {
    outcome.problem = "the test's own call does not fit its buffers";
    return outcome;
  }
  // The reference first. Rank r's output is `whole` from element r x count on (a
  // reduce-scatter's block), else all of it. Every output element the call must write starts
  // as no right answer, so that one the kernel never wrote cannot pass for a result (a
  // uniform poison could: all ones is the NaN that a NaN input makes right, and for integers
  // a value like any other).
  const std::vector<Expected> whole =
      call.collective == Collective::AllGather ? gatheredResults(inputs) : expectedResults(inputs, call.op);
  auto expectedOf = [&](int r) {
    if (call.collective != Collective::ReduceScatter) return whole;
    const auto from = whole.begin() + static_cast<long>(r * call.count);
    return std::vector<Expected>(from, from + static_cast<long>(call.count));
  };
  const bool inPlaceGather = call.inPlace && call.collective == Collective::AllGather;
  const HostBuffer wrongGathered = inPlaceGather ? wrongAnswers(whole, call.type) : HostBuffer{call.type, {}};
  const std::uint8_t poison = kGuardByte;
  in_.poison(poison);
  out_.poison(poison);
  std::vector<std::vector<std::uint8_t>> inImages(ranks_), outImages(ranks_);
  std::vector<std::size_t> outputAt(ranks_);  // the output's first byte in its buffer (in_ in place, else out_)
  std::vector<const void*> send(ranks_);
  std::vector<void*> recv(ranks_);
  for (int r = 0; r < ranks_; ++r) {
    const std::size_t shift = call.sendShift[r];
    const std::size_t ownBlock = static_cast<std::size_t>(r) * blockBytes;
    std::vector<std::uint8_t>& image = inImages[r];
    image.assign(shift, poison);
    if (inPlaceGather) {
      // The other ranks' blocks of the output hold no right answer; its own block, its input.
      image.insert(image.end(), wrongGathered.bytes.begin(), wrongGathered.bytes.end());
      std::copy(inputs[r].bytes.begin(), inputs[r].bytes.end(), image.begin() + static_cast<long>(shift + ownBlock));
    } else {
      image.insert(image.end(), inputs[r].bytes.begin(), inputs[r].bytes.end());
    }
    in_.upload(r, HostBuffer{call.type, image});
    std::uint8_t* input = static_cast<std::uint8_t*>(in_.at(r)) + shift;
    send[r] = inPlaceGather ? input + ownBlock : input;
    if (call.inPlace) {
      outputAt[r] = shift + (call.collective == Collective::ReduceScatter ? ownBlock : 0);
      recv[r] = static_cast<std::uint8_t*>(in_.at(r)) + outputAt[r];
    } else {
      outputAt[r] = call.recvShift[r];
      const HostBuffer wrong = wrongAnswers(expectedOf(r), call.type);
      outImages[r].assign(call.recvShift[r], poison);
      outImages[r].insert(outImages[r].end(), wrong.bytes.begin(), wrong.bytes.end());
      out_.upload(r, HostBuffer{call.type, outImages[r]});
      recv[r] = static_cast<std::uint8_t*>(out_.at(r)) + outputAt[r];
    }
  }

  std::vector<SubmitResult> results;
  int launched = 0;
  for (int r = 0; r < ranks_; ++r) {
    CollectiveCall submitted;
    submitted.collective = call.collective;
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
    const std::vector<std::uint8_t>& before = call.inPlace ? inImages[r] : outImages[r];
    const std::size_t begin = outputAt[r], end = begin + recvBytes;
    const std::vector<std::uint8_t> got = result.read(r, 0, std::min(result.bytes(), std::max(before.size(), end) + kGuardBytes));
    const std::string changed = firstChanged(got, before, poison, begin, end);
    if (!changed.empty() && outcome.damage.empty()) outcome.damage = "rank " + std::to_string(r) + ": " + changed;
    HostBuffer output{call.type, std::vector<std::uint8_t>(got.begin() + static_cast<long>(begin),
                                                           got.begin() + static_cast<long>(end))};
    if (call.collective == Collective::ReduceScatter) {
      // Each rank's own block: compared with its share of the reference.
      std::string mismatch;
      const std::size_t wrong = countMismatches(expectedOf(r), output, &mismatch);
      if (wrong != 0 && outcome.firstMismatch.empty()) outcome.firstMismatch = "rank " + std::to_string(r) + ": " + mismatch;
      outcome.mismatches += wrong;
    } else if (r == 0) {
      outcome.mismatches = countMismatches(whole, output, &outcome.firstMismatch);
      first = std::move(output.bytes);
    } else if (output.bytes != first && outcome.differingRank < 0) {
      outcome.differingRank = r;
    }
    if (!call.inPlace) {
      const std::vector<std::uint8_t> input = in_.read(r, 0, std::min(in_.bytes(), inImages[r].size() + kGuardBytes));
      if (!firstChanged(input, inImages[r], poison, 0, 0).empty() && outcome.damage.empty()) {
        outcome.damage = "rank " + std::to_string(r) + ": its input changed";
      }
    }
  }
  return outcome;
}

}  // namespace car::testing
