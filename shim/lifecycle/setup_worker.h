// The one thread of ours. It advances every set-up in progress (shim/handshake/handshake.h)
// between the program's calls, and runs the CUDA chores no thread of the program may wait for
// (shim/ipc/background.h). It never calls NCCL: what it needs to know of NCCL the program's
// own calls tell it (Communicator::noteNcclAccepted). Our private streams and the peers'
// boards are polled, never waited on, so no set-up holds a thread of the program waiting for a
// peer; the polls back off to half a millisecond while nothing moves, and the thread sleeps
// when there is no work. It runs in relaxed capture mode, so a graph another thread of the
// program captures meanwhile is not broken by its CUDA calls.
//
// At exit it stops: the process waits for the set-up step or chore in flight (bounded,
// kExitWait), and after that the thread makes no CUDA call, nor anything else of ours. A
// fork()ed child has no worker until its own first set-up; the parent's set-ups are not the
// child's (shim/lifecycle/registry.h).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "handshake/handshake.h"
#include "ipc/background.h"

namespace car {

// From now on the worker advances these set-ups until they settle.
void advanceInBackground(const std::vector<std::shared_ptr<SetUp>>& setUps);

// Waits until every one of `setUps` has settled, or until `deadline` (setupClock() seconds)
// has passed: only where every rank is in the same call (a blocking creation), so that the
// wait is for peers that are already taking part.
void waitUntilSettled(const std::vector<std::shared_ptr<SetUp>>& setUps, double deadline);

// At exit, how long the process waits for the worker's step in flight. A step never waits for
// a peer; the bound is for a driver that hangs.
constexpr auto kExitWait = std::chrono::seconds(10);

}  // namespace car
