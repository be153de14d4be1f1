// One collective (an all-reduce, all-gather or reduce-scatter) of any (type, op) on every rank
// of a RankGroup, checked end to end: each rank's buffers start at its own byte offset,
// everything around the output is guarded, every element of the output starts with no right
// answer, the output is compared with the host reference (host_data.h), every rank's bits
// with rank 0's where the ranks' outputs are the same, and every byte the call must not write
// (around the output, the input, in place the input's other blocks) must be left alone. A call that
// only some ranks launched, that the ranks ran on different kernels, or that does not finish
// in time is aborted, and the next call gets a new group: one broken (type, op) does not
// take the rest of a sweep down with it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device_buffers.h"
#include "host_data.h"
#include "rank_group.h"

namespace car::testing {

struct OpCall {
  Collective collective = Collective::AllReduce;
  ElementType type = ElementType::Float32;
  ReduceOp op = ReduceOp::Sum;  // not read for an all-gather
  std::size_t count = 0;        // NCCL's count (kernels/algorithms.h, Collective)
  // NCCL's in-place forms: an all-gather's input is the rank's block of its output, a
  // reduce-scatter's output the rank's block of its input.
  bool inPlace = false;
  // Byte offsets of each rank's send (and, out of place, receive) buffer, below kMaxShift.
  std::vector<std::size_t> sendShift;
  std::vector<std::size_t> recvShift;
};

struct OpOutcome {
  bool launched = false;   // every rank launched our kernel
  bool forwarded = false;  // no rank did: every rank would hand the call to NCCL
  ForwardReason reason = ForwardReason::kCount;  // when forwarded: rank 0's reason
  std::string problem;     // partial launch, disagreeing ranks, a failed launch, a hang
  Algorithm ran = Algorithm::kCount;
  std::size_t mismatches = 0;
  std::string firstMismatch;
  int differingRank = -1;  // a rank whose output bits differ from rank 0's
  std::string damage;      // a byte outside the output written, or an input changed
};

// The byte offsets of `ranks` buffers for one call. pattern 0: all 0 (16-byte aligned);
// 1: multiples of the element size, different on neighbouring ranks; 2: any byte offset,
// different on every rank. `salt` varies them from call to call.
std::vector<std::size_t> shiftsFor(int ranks, ElementType type, int pattern, int salt);

// Seconds a call may take before it counts as hung: CAR_GPU_TEST_HANG_SECONDS, default 60
// (compute-sanitizer slows the kernels down by orders of magnitude).
double hangSeconds();

class OpRunner {
 public:
  static constexpr std::size_t kMaxShift = 16;
  // Guard bytes checked after the output.
  static constexpr std::size_t kGuardBytes = 32;

  // Buffers hold messages of up to maxMessageBytes (the whole message: an all-gather's
  // output, a reduce-scatter's input) at any shift.
  OpRunner(int device, int ranks, std::function<Config(int rank)> configOfRank, std::size_t maxMessageBytes);
  ~OpRunner();

  int ranks() const { return ranks_; }
  // inputs[r]: rank r's send buffer (an all-reduce's or all-gather's `count` elements, a
  // reduce-scatter's ranks x count).
  OpOutcome run(const OpCall& call, const std::vector<HostBuffer>& inputs);

 private:
  void abortGroup();

  int device_;
  int ranks_;
  std::function<Config(int)> configOfRank_;
  std::unique_ptr<RankGroup> group_;
  DeviceBuffers in_, out_;
};

}  // namespace car::testing
