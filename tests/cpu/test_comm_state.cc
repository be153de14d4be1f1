// The communicator state's phases (shim/lifecycle/comm_state.h): which changes are allowed,
// that a refused one changes nothing, and what each phase counts for an all-reduce. No GPU:
// the Ready phase needs an engine, which these tests cannot make; the shim tests cover it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "lifecycle/comm_state.h"

using namespace car;

namespace {

const std::vector<CommPhase> kPhases = {CommPhase::Pending, CommPhase::SettingUp, CommPhase::Agreeing,
                                        CommPhase::Ready, CommPhase::Ineligible, CommPhase::Released};

ncclComm_t fakeComm(std::uintptr_t value) { return reinterpret_cast<ncclComm_t>(value); }

std::uint64_t forwarded(CommState& state, ForwardReason reason) { return state.counters().forwarded(reason); }

}  // namespace

TEST_CASE("comm state: only the arrows of the life-cycle are allowed", "[comm-state]") {
  const std::vector<std::pair<CommPhase, CommPhase>> allowed = {
      {CommPhase::Pending, CommPhase::SettingUp},     {CommPhase::SettingUp, CommPhase::Agreeing},
      {CommPhase::Agreeing, CommPhase::Ready},        {CommPhase::Pending, CommPhase::Ineligible},
      {CommPhase::SettingUp, CommPhase::Ineligible},  {CommPhase::Agreeing, CommPhase::Ineligible},
      {CommPhase::Ready, CommPhase::Ineligible},      {CommPhase::Pending, CommPhase::Released},
      {CommPhase::SettingUp, CommPhase::Released},    {CommPhase::Agreeing, CommPhase::Released},
      {CommPhase::Ready, CommPhase::Released},        {CommPhase::Ineligible, CommPhase::Released},
  };
  for (CommPhase from : kPhases) {
    for (CommPhase to : kPhases) {
      CAPTURE(phaseName(from), phaseName(to));
      bool expected = false;
      for (const auto& arrow : allowed) expected = expected || (arrow.first == from && arrow.second == to);
      CHECK(phaseChangeAllowed(from, to) == expected);
    }
  }
}

TEST_CASE("comm state: a set-up claims a pending communicator once, and its verdict ends it", "[comm-state]") {
  CommState state(fakeComm(0x10), false);
  CHECK(state.phase() == CommPhase::Pending);
  {
    CommState::Locked locked = state.lock();
    CHECK(locked.beginSetUp());
    CHECK_FALSE(locked.beginSetUp());  // a second set-up of the same communicator
    CHECK(locked.phase() == CommPhase::SettingUp);
    // Causes that belong to other phases change nothing.
    CHECK_FALSE(locked.becomeIneligible(IneligibleCause::NoSetUp, "init failed"));
    CHECK_FALSE(locked.becomeIneligible(IneligibleCause::LaunchFailed, "our launch failed"));
    CHECK(locked.phase() == CommPhase::SettingUp);
    // Agreeing needs an engine, a block and an agreement: refused, nothing changed.
    CHECK_FALSE(locked.beginAgreeing(nullptr, Verdict{}, nullptr));
    CHECK(locked.phase() == CommPhase::SettingUp);
    CHECK(locked.becomeIneligible(IneligibleCause::Verdict, "ranks span 2 hosts"));
    CHECK(locked.phase() == CommPhase::Ineligible);
    CHECK(locked.reason() == "ranks span 2 hosts");
    CHECK_FALSE(locked.becomeIneligible(IneligibleCause::Verdict, "again"));
    CHECK(locked.reason() == "ranks span 2 hosts");
    const std::optional<CommPhase> left = locked.release();
    REQUIRE(left);
    CHECK(*left == CommPhase::Ineligible);
    CHECK_FALSE(locked.release());
    CHECK_FALSE(locked.beginSetUp());
  }
  CHECK(state.phase() == CommPhase::Released);
}

TEST_CASE("comm state: a communicator that never reaches a set-up, or is released first", "[comm-state]") {
  CommState failed(fakeComm(0x20), true);
  CHECK(failed.lock().becomeIneligible(IneligibleCause::NoSetUp, "the group that created it failed"));
  CHECK_FALSE(failed.lock().beginSetUp());
  CHECK(failed.phase() == CommPhase::Ineligible);

  CommState released(fakeComm(0x30), true);
  const std::optional<CommPhase> left = released.lock().release();
  REQUIRE(left);
  CHECK(*left == CommPhase::Pending);
  // The set-up that comes after the release neither claims it nor marks it.
  CHECK_FALSE(released.lock().beginSetUp());
  CHECK_FALSE(released.lock().becomeIneligible(IneligibleCause::NoSetUp, "too late"));
  CHECK(released.phase() == CommPhase::Released);
}

TEST_CASE("comm state: an all-reduce is counted by the phase it meets", "[comm-state]") {
  CommState state(fakeComm(0x40), false);
  CHECK_FALSE(state.lock().takesCall());
  CHECK(forwarded(state, ForwardReason::NotReady) == 1);
  REQUIRE(state.lock().beginSetUp());
  CHECK_FALSE(state.lock().takesCall());
  CHECK(forwarded(state, ForwardReason::NotReady) == 2);
  REQUIRE(state.lock().becomeIneligible(IneligibleCause::Verdict, "1 ranks (we take 2 to 8)"));
  CHECK_FALSE(state.lock().takesCall());
  CHECK_FALSE(state.lock().takesCall());
  CHECK(forwarded(state, ForwardReason::NotEligible) == 2);
  REQUIRE(state.lock().release());
  CHECK_FALSE(state.lock().takesCall());
  CHECK(forwarded(state, ForwardReason::NotReady) == 2);
  CHECK(forwarded(state, ForwardReason::NotEligible) == 2);
}

TEST_CASE("comm state: the release flags are each taken once, without the state's lock", "[comm-state]") {
  CommState state(fakeComm(0x50), false);
  CHECK(describe(state).find("rank ?/?") != std::string::npos);
  state.learnIdentity(1, 4, 0);
  CHECK(describe(state).find("rank 1/4") != std::string::npos);
  CHECK_FALSE(state.stopRequested());
  CHECK_FALSE(state.requestStop());  // no engine to tell
  CHECK(state.stopRequested());
  CHECK(state.claimRelease());
  CHECK_FALSE(state.claimRelease());
  CHECK(state.firstRefusal());
  CHECK_FALSE(state.firstRefusal());
  CHECK_FALSE(state.abortReachedNccl());
  state.noteAbortReachedNccl();
  CHECK(state.abortReachedNccl());
  // A stop asked for makes even a Ready communicator forward; here it meets Pending first.
  CommState::Locked locked = state.lock();
  CHECK_FALSE(locked.takesCall());
  CHECK(forwarded(state, ForwardReason::NotReady) == 1);
}
