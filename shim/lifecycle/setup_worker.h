// The one thread that advances every set-up in progress (shim/handshake/handshake.h) between
// the program's calls. NCCL's state, our private streams and the peers' boards are polled,
// never waited on, so no set-up ever holds a thread of the program waiting for a peer; the
// polls back off to half a millisecond while nothing moves, and the thread sleeps when no
// set-up is left. Its CUDA calls run in relaxed capture mode, so a graph another thread of
// the program captures meanwhile is not broken by them (cudaThreadExchangeStreamCaptureMode).
// A fork()ed child has no worker until its own first set-up; the parent's set-ups are not
// the child's (shim/lifecycle/registry.h).
#pragma once

#include <memory>
#include <vector>

#include "handshake/handshake.h"

namespace car {

// From now on the worker advances these set-ups until they settle.
void advanceInBackground(const std::vector<std::shared_ptr<SetUp>>& setUps);

// Waits until every one of `setUps` has settled, or until `deadline` (setupClock() seconds)
// has passed: only where every rank is in the same call (a blocking creation), so that the
// wait is for peers that are already taking part.
void waitUntilSettled(const std::vector<std::shared_ptr<SetUp>>& setUps, double deadline);

}  // namespace car
