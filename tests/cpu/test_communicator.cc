// The communicator's phases and its one decision (shim/lifecycle/communicator.h): which
// changes are allowed, that a refused one changes nothing, what each phase makes of a call and
// counts, and the places calls take in its sequence. No GPU: the Ready phase needs a launcher,
// which these tests cannot make; the shim tests over the fake CUDA runtime cover it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "lifecycle/communicator.h"

using namespace car;

namespace {

const std::vector<CommPhase> kPhases = {CommPhase::Pending, CommPhase::SettingUp, CommPhase::Agreeing,
                                        CommPhase::Ready, CommPhase::Ineligible, CommPhase::Released};

ncclComm_t fakeComm(std::uintptr_t value) { return reinterpret_cast<ncclComm_t>(value); }

std::uint64_t forwarded(Communicator& comm, ForwardReason reason) { return comm.counters().forwarded(reason); }

CollectiveCall smallSum() {
  CollectiveCall call;
  call.type = ElementType::Float32;
  call.op = ReduceOp::Sum;
  call.count = 256;
  return call;
}

Decision decide(Communicator& comm, bool insideGroup = false) {
  CallContext context;
  context.insideGroup = insideGroup;
  Holdings letGo;
  return comm.lock().decide(smallSum(), context, &letGo);
}

}  // namespace

TEST_CASE("communicator: only the arrows of the life-cycle are allowed", "[communicator]") {
  const std::vector<std::pair<CommPhase, CommPhase>> allowed = {
      {CommPhase::Pending, CommPhase::SettingUp},     {CommPhase::SettingUp, CommPhase::Agreeing},
      {CommPhase::SettingUp, CommPhase::Pending},     {CommPhase::Agreeing, CommPhase::Ready},
      {CommPhase::Pending, CommPhase::Ineligible},    {CommPhase::SettingUp, CommPhase::Ineligible},
      {CommPhase::Agreeing, CommPhase::Ineligible},   {CommPhase::Ready, CommPhase::Ineligible},
      {CommPhase::Pending, CommPhase::Released},      {CommPhase::SettingUp, CommPhase::Released},
      {CommPhase::Agreeing, CommPhase::Released},     {CommPhase::Ready, CommPhase::Released},
      {CommPhase::Ineligible, CommPhase::Released},
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

TEST_CASE("communicator: a set-up claims a pending communicator once, and its verdict ends it", "[communicator]") {
  Communicator comm(fakeComm(0x10), false);
  CHECK(comm.phase() == CommPhase::Pending);
  {
    Communicator::Locked locked = comm.lock();
    CHECK(locked.beginSetUp());
    CHECK_FALSE(locked.beginSetUp());  // a second set-up of the same communicator
    CHECK(locked.phase() == CommPhase::SettingUp);
    // Causes that belong to other phases change nothing.
    CHECK_FALSE(locked.becomeIneligible(IneligibleCause::NoSetUp, "init failed", nullptr));
    CHECK_FALSE(locked.becomeIneligible(IneligibleCause::LaunchFailed, "our launch failed", nullptr));
    CHECK(locked.phase() == CommPhase::SettingUp);
    // Agreeing needs a launcher, a block and an agreement: refused, nothing changed.
    std::unique_ptr<BufferBlock> block;
    Holdings letGo;
    CHECK_FALSE(locked.beginAgreeing(&block, {}, Verdict{}, nullptr, &letGo));
    CHECK(locked.phase() == CommPhase::SettingUp);
    CHECK(locked.becomeIneligible(IneligibleCause::Verdict, "ranks span 2 hosts", &letGo));
    CHECK_FALSE(letGo);  // it held nothing
    CHECK(locked.phase() == CommPhase::Ineligible);
    CHECK(locked.reason() == "ranks span 2 hosts");
    CHECK_FALSE(locked.becomeIneligible(IneligibleCause::Verdict, "again", nullptr));
    CHECK(locked.reason() == "ranks span 2 hosts");
    Holdings held;
    const std::optional<CommPhase> left = locked.release(&held);
    REQUIRE(left);
    CHECK(*left == CommPhase::Ineligible);
    CHECK_FALSE(locked.release(&held));
    CHECK_FALSE(locked.beginSetUp());
  }
  CHECK(comm.phase() == CommPhase::Released);
}

TEST_CASE("communicator: an exchange NCCL refused leaves it pending, for the next set-up point", "[communicator]") {
  Communicator comm(fakeComm(0x18), true);
  REQUIRE(comm.lock().beginSetUp());
  comm.lock().exchangeRefused();
  CHECK(comm.phase() == CommPhase::Pending);
  CHECK(comm.lock().beginSetUp());
  // Only a set-up still in progress goes back.
  REQUIRE(comm.lock().becomeIneligible(IneligibleCause::Verdict, "1 ranks", nullptr));
  comm.lock().exchangeRefused();
  CHECK(comm.phase() == CommPhase::Ineligible);
}

TEST_CASE("communicator: a communicator that never reaches a set-up, or is released first", "[communicator]") {
  Communicator failed(fakeComm(0x20), true);
  CHECK(failed.lock().becomeIneligible(IneligibleCause::NoSetUp, "the group that created it failed", nullptr));
  CHECK_FALSE(failed.lock().beginSetUp());
  CHECK(failed.phase() == CommPhase::Ineligible);

  Communicator released(fakeComm(0x30), true);
  Holdings held;
  const std::optional<CommPhase> left = released.lock().release(&held);
  REQUIRE(left);
  CHECK(*left == CommPhase::Pending);
  // The set-up that comes after the release neither claims it nor marks it.
  CHECK_FALSE(released.lock().beginSetUp());
  CHECK_FALSE(released.lock().becomeIneligible(IneligibleCause::NoSetUp, "too late", nullptr));
  CHECK(released.phase() == CommPhase::Released);
}

TEST_CASE("communicator: a call is decided and counted once, by the phase it meets", "[communicator]") {
  Communicator comm(fakeComm(0x40), false);
  Decision decision = decide(comm);
  CHECK(decision.route == Decision::Route::Nccl);
  CHECK(decision.reason == ForwardReason::NotReady);
  CHECK(decision.index == 0);
  CHECK(forwarded(comm, ForwardReason::NotReady) == 1);
  REQUIRE(comm.lock().beginSetUp());
  decision = decide(comm, /*insideGroup=*/true);
  CHECK(decision.route == Decision::Route::Nccl);
  CHECK(decision.index == 1);
  CHECK(forwarded(comm, ForwardReason::NotReady) == 2);
  REQUIRE(comm.lock().becomeIneligible(IneligibleCause::Verdict, "1 ranks (we take 2 to 8)", nullptr));
  CHECK(decide(comm).reason == ForwardReason::NotEligible);
  CHECK(decide(comm).index == 3);
  CHECK(forwarded(comm, ForwardReason::NotEligible) == 2);
  Holdings held;
  REQUIRE(comm.lock().release(&held));
  decision = decide(comm);
  CHECK(decision.route == Decision::Route::Released);  // forwarded, not counted
  CHECK(forwarded(comm, ForwardReason::NotReady) == 2);
  CHECK(forwarded(comm, ForwardReason::NotEligible) == 2);
}

TEST_CASE("communicator: an Ineligible communicator counts every call as its verdict says, on both ways in",
          "[communicator][pcie]") {
  // The PCIe case nothing measured: its set-up's verdict makes it Ineligible, counted as untuned.
  Communicator comm(fakeComm(0x44), false);
  REQUIRE(comm.lock().beginSetUp());
  CHECK(decide(comm).reason == ForwardReason::NotReady);  // before the verdict
  Holdings letGo;
  REQUIRE(comm.lock().becomeIneligible(IneligibleCause::Verdict, "pcie untuned (...)", &letGo, ForwardReason::Untuned));
  CHECK(comm.ineligibleReason() == ForwardReason::Untuned);
  CHECK(decide(comm).reason == ForwardReason::Untuned);  // under the lock
  CHECK(comm.forwardedAsIneligible());                     // without it, as a hook does first
  CallContext context;
  const Decision viaShortcut = comm.decide(smallSum(), context, &letGo);
  CHECK(viaShortcut.route == Decision::Route::Nccl);
  CHECK(viaShortcut.reason == ForwardReason::Untuned);
  CHECK(forwarded(comm, ForwardReason::Untuned) == 3);
  CHECK(forwarded(comm, ForwardReason::NotEligible) == 0);
  CHECK(forwarded(comm, ForwardReason::NotReady) == 1);
  // A refused forward gives back what it counted.
  comm.giveBack(viaShortcut);
  CHECK(forwarded(comm, ForwardReason::Untuned) == 2);
  // Once Ineligible, a later cause changes neither the phase nor what its calls count as.
  CHECK_FALSE(comm.lock().becomeIneligible(IneligibleCause::Verdict, "again", nullptr));
  CHECK(comm.ineligibleReason() == ForwardReason::Untuned);

  // Any other cause counts ineligible-comm.
  Communicator failed(fakeComm(0x46), false);
  REQUIRE(failed.lock().becomeIneligible(IneligibleCause::NoSetUp, "its init failed", nullptr));
  CHECK(failed.forwardedAsIneligible());
  CHECK(decide(failed).reason == ForwardReason::NotEligible);
  CHECK(forwarded(failed, ForwardReason::NotEligible) == 2);
}

TEST_CASE("communicator: a call NCCL refused gives its place in the sequence back, and its count",
          "[communicator]") {
  Communicator comm(fakeComm(0x48), true);
  CHECK(decide(comm).index == 0);
  const Decision refused = decide(comm);
  CHECK(refused.index == 1);
  CHECK(forwarded(comm, ForwardReason::NotReady) == 2);
  comm.lock().giveBack(refused);
  CHECK(comm.lock().nextIndex() == 1);
  CHECK(forwarded(comm, ForwardReason::NotReady) == 1);
  CHECK(decide(comm).index == 1);  // the retried call takes the same place on every rank
  // A group NCCL refused gives back every place from its first call on (latest first).
  const Decision first = decide(comm, true);
  const Decision second = decide(comm, true);
  CHECK(first.index == 2);
  CHECK(second.index == 3);
  comm.lock().giveBack(second);
  comm.lock().giveBack(first);
  CHECK(decide(comm).index == 2);
  CHECK(forwarded(comm, ForwardReason::NotReady) == 3);
  // A place already taken again is not given back by an older decision's copy.
  Decision stale = first;
  stale.index = 7;
  comm.lock().giveBack(stale);
  CHECK(comm.lock().nextIndex() == 3);
  CHECK(forwarded(comm, ForwardReason::NotReady) == 3);
  // A decision that took no place (an ineligible communicator's) gives back nothing.
  Decision unplaced;
  comm.lock().giveBack(unplaced);
  CHECK(comm.lock().nextIndex() == 3);
}

TEST_CASE("communicator: the release flags are each taken once, without the lock", "[communicator]") {
  Communicator comm(fakeComm(0x50), false);
  CHECK(describe(comm).find("rank ?/?") != std::string::npos);
  comm.learnIdentity(1, 4, 0);
  CHECK(describe(comm).find("rank 1/4") != std::string::npos);
  CHECK_FALSE(comm.stopRequested());
  CHECK_FALSE(comm.requestStop());  // no launcher to tell
  CHECK(comm.stopRequested());
  CHECK(comm.claimRelease());
  CHECK_FALSE(comm.claimRelease());
  CHECK(comm.firstRefusal());
  CHECK_FALSE(comm.firstRefusal());
  CHECK_FALSE(comm.abortReachedNccl());
  comm.noteAbortReachedNccl();
  CHECK(comm.abortReachedNccl());
  // A stop asked for makes even a Ready communicator forward; here it meets Pending first.
  CHECK(decide(comm).reason == ForwardReason::NotReady);
  CHECK(forwarded(comm, ForwardReason::NotReady) == 1);
}

TEST_CASE("communicator: what NCCL reports about a communicator lets our kernel take a call or not",
          "[communicator]") {
  CHECK(ncclAllowsOurKernel(ncclSuccess, ncclSuccess));
  CHECK(ncclAllowsOurKernel(ncclSuccess, ncclInProgress));  // a nonblocking one, busy
  for (ncclResult_t error : {ncclUnhandledCudaError, ncclSystemError, ncclInternalError, ncclInvalidArgument,
                             ncclInvalidUsage, ncclRemoteError}) {
    CHECK_FALSE(ncclAllowsOurKernel(ncclSuccess, error));  // NCCL's asynchronous error
    CHECK_FALSE(ncclAllowsOurKernel(error, ncclSuccess));  // cannot even ask
  }
}
