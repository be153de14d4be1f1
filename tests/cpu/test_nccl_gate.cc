// The gate our set-up's NCCL calls pass (shim/lifecycle/nccl_gate.h): once closed, no call starts;
// closing waits for the call in flight, but not forever.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "lifecycle/nccl_gate.h"

using namespace car;
using namespace std::chrono_literals;

TEST_CASE("gate: closing waits for the call in flight, then nothing passes", "[gate]") {
  NcclGate gate;
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
  NcclGate gate;
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
  NcclGate a, b;
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

TEST_CASE("gate: a poll that can come again never waits behind a call in flight", "[gate]") {
  NcclGate gate;
  int ran = 0;
  CHECK(gate.tryPass([&] { ++ran; }) == NcclGate::Attempt::Ran);
  std::atomic<bool> inside{false}, leave{false};
  std::thread caller([&] {  // a caller's call inside NCCL
    const NcclGate::Hold hold(gate);
    inside = true;
    while (!leave) std::this_thread::sleep_for(1ms);
  });
  while (!inside) std::this_thread::sleep_for(1ms);
  CHECK(gate.tryPass([&] { ++ran; }) == NcclGate::Attempt::Busy);
  leave = true;
  caller.join();
  CHECK(ran == 1);
  REQUIRE(gate.close(1.0));
  CHECK(gate.tryPass([&] { ++ran; }) == NcclGate::Attempt::Closed);
  CHECK(ran == 1);
}
