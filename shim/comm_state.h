// Our side-state of one real communicator (one rank of it, in this process).
#pragma once

#include <nccl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "peer_mapping.h"
#include "rank_engine.h"
#include "stats.h"

namespace car {

enum class CommPhase {
  // Waiting for the real communicator or its group, or in the handshake. A handshake uses
  // engine and peers without the lock (it may wait in a collective for long): a release
  // meanwhile only marks the state Released, and the handshake frees them when it ends.
  Pending,
  Ready,       // set up and eligible: eligible all-reduces run on our kernels
  Ineligible,  // set up, not eligible (reason says why): every all-reduce is forwarded
  Released,    // destroyed, aborted or finalized
};

struct CommState {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int ranks = 0;
  int device = 0;
  bool nonblocking = false;       // set up lazily, never inside the creating call
  bool allReduceInGroup = false;  // a pending nonblocking comm met an all-reduce in a group

  std::mutex mutex;               // guards everything below against setup/teardown races
  // Written under the mutex; atomic so the all-reduce hook may peek at it without the lock.
  std::atomic<CommPhase> phase{CommPhase::Pending};
  std::string reason;             // why Ineligible
  std::unique_ptr<RankEngine> engine;
  PeerMappings peers;
  std::atomic<bool> failureWarned{false};

  // Counters of this communicator: the engine's once it exists, else our own.
  CallStats& stats() { return engine ? engine->stats() : forwardedWithoutEngine; }
  CallStats forwardedWithoutEngine;
};

// "comm 0x... rank 1/4", the prefix of every log line about a communicator.
std::string describe(const CommState& state);

}  // namespace car
