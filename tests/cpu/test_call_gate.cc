// The gate our set-up's NCCL calls pass (shim/lifecycle/call_gate.h): once closed, no call starts;
// closing waits for the call in flight, but not forever.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "lifecycle/call_gate.h"

using namespace car;
using namespace std::chrono_literals;

TEST_CASE("gate: closing waits for the call in flight, then nothing passes", "[gate]") {
  CallGate gate;
  std::atomic<bool> inside{false};
  std::atomic<bool> callEnded{false};
  std::thread caller([&] {
    gate.pass([&] {
      inside = true;
      std::this_thread::sleep_for(100ms);
      callEnded = true;
    });
  });
  while (!inside) std::this_thread::yield();
  CHECK(gate.close(5.0));
  CHECK(callEnded);  // close() returned only after the call
  caller.join();
  bool ran = false;
  CHECK_FALSE(gate.pass([&] { ran = true; }));
  CHECK_FALSE(ran);
  CHECK_FALSE(gate.enter());
}

TEST_CASE("gate: a call that never returns does not hold the closer forever", "[gate]") {
  CallGate gate;
  std::atomic<bool> inside{false};
  std::atomic<bool> release{false};
  std::thread caller([&] {
    gate.pass([&] {
      inside = true;
      while (!release) std::this_thread::sleep_for(1ms);
    });
  });
  while (!inside) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(gate.close(0.1));
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK(gate.closed());
  release = true;
  caller.join();
}

TEST_CASE("gate: several gates held across one group", "[gate]") {
  CallGate a, b;
  REQUIRE(a.enter());
  REQUIRE(b.enter());
  std::atomic<bool> closed{false};
  std::thread closer([&] { closed = b.close(5.0); });
  std::this_thread::sleep_for(50ms);
  CHECK_FALSE(closed);  // waits for the group to end
  a.leave();
  b.leave();
  closer.join();
  CHECK(closed);
  CHECK(a.enter());
  a.leave();
}

TEST_CASE("gate: a closer and an enter racing: either the closer sees the call, or the call sees it closed",
          "[gate]") {
  for (int round = 0; round < 200; ++round) {
    CallGate gate;
    std::atomic<bool> go{false};
    std::atomic<bool> entered{false}, callRunning{false}, closedSeenInside{false};
    std::thread caller([&] {
      while (!go) std::this_thread::yield();
      if (gate.enter()) {
        entered = true;
        callRunning = true;
        std::this_thread::sleep_for(1ms);
        callRunning = false;
        gate.leave();
      }
    });
    go = true;
    const bool waited = gate.close(5.0);
    // Once close() returned, no call of ours may be running.
    closedSeenInside = callRunning.load();
    caller.join();
    CHECK(waited);
    CHECK_FALSE(closedSeenInside);
    CHECK_FALSE(gate.enter());
  }
}
