#include "lifecycle/comm_state.h"


#include "log.h"

namespace car {
namespace {

CommPhase phaseBefore(IneligibleCause cause) {
  switch (cause) {
    case IneligibleCause::NoSetUp: return CommPhase::Pending;
    case IneligibleCause::Verdict: return CommPhase::SettingUp;
    case IneligibleCause::NotAgreed: return CommPhase::Agreeing;
    case IneligibleCause::NcclBroken:
    case IneligibleCause::LaunchFailed: return CommPhase::Ready;
  }
  return CommPhase::Released;
}

}  // namespace

const char* phaseName(CommPhase phase) {
  switch (phase) {
    case CommPhase::Pending: return "pending";
    case CommPhase::SettingUp: return "setting-up";
    case CommPhase::Agreeing: return "agreeing";
    case CommPhase::Ready: return "ready";
    case CommPhase::Ineligible: return "ineligible";
    case CommPhase::Released: return "released";
  }
  return "?";
}

bool phaseChangeAllowed(CommPhase from, CommPhase to) {
  switch (to) {
    case CommPhase::Pending: return false;
    case CommPhase::SettingUp: return from == CommPhase::Pending;
    case CommPhase::Agreeing: return from == CommPhase::SettingUp;
    case CommPhase::Ready: return from == CommPhase::Agreeing;
    case CommPhase::Ineligible:
      return from == CommPhase::Pending || from == CommPhase::SettingUp || from == CommPhase::Agreeing ||
             from == CommPhase::Ready;
    case CommPhase::Released: return from != CommPhase::Released;
  }
  return false;
}

void CommState::learnIdentity(int rank, int ranks, int device) {
  rank_.store(rank, std::memory_order_relaxed);
  device_.store(device, std::memory_order_relaxed);
  ranks_.store(ranks, std::memory_order_release);  // last: describe() reads it first
}

bool CommState::requestStop() {
  std::lock_guard<std::mutex> lock(engineMutex_);
  stopRequested_.store(true);
  if (!engine_) return false;
  engine_->raiseAbort();
  return true;
}

bool CommState::moveTo(CommPhase to) {
  const CommPhase from = phase_.load(std::memory_order_relaxed);
  if (!phaseChangeAllowed(from, to)) return false;
  phase_.store(to, std::memory_order_release);
  return true;
}

bool CommState::Locked::beginSetUp() { return state_.moveTo(CommPhase::SettingUp); }

void CommState::Locked::installEngine(std::unique_ptr<RankEngine> engine) {
  std::lock_guard<std::mutex> lock(state_.engineMutex_);
  state_.engine_ = std::move(engine);
  if (state_.engine_ && state_.stopRequested_.load()) state_.engine_->raiseAbort();
}

bool CommState::Locked::beginAgreeing(std::unique_ptr<BufferBlock> block, const Verdict& verdict,
                                     std::unique_ptr<CallSwitch> agreement) {
  if (!state_.engine_ || !block || !agreement || !state_.moveTo(CommPhase::Agreeing)) {
    CAR_WARN(state_.device(), "{}: internal error: cannot become ready from phase {}; all-reduces go to NCCL",
             describe(state_), phaseName(phase()));
    if (agreement) agreement->giveUp();
    agreement.reset();  // it reads the block's boards
    BufferBlock::retire(std::move(block), describe(state_));
    return false;
  }
  state_.block_ = std::move(block);
  state_.agreement_ = std::move(agreement);
  state_.verdict_ = verdict;
  follow(state_.agreement_->joinReady(state_.calls_));
  return true;
}

void CommState::Locked::follow(const CallSwitch::Outcome& outcome) {
  if (phase() != CommPhase::Agreeing || outcome.state == CallSwitch::State::Undecided) return;
  state_.agreement_.reset();
  if (outcome.state == CallSwitch::State::Never) {
    becomeIneligible(IneligibleCause::NotAgreed, "another rank gave up its set-up before the ranks agreed on a first "
                                                 "call (its log says why)");
    return;
  }
  state_.firstTaken_ = outcome.firstTaken;
  state_.moveTo(CommPhase::Ready);
  const Verdict& verdict = state_.verdict_;
  const Config& config = state_.engine_->config();
  CAR_INFO(state_.device(), "{}", logText(formatSetupEligible, describe(state_).c_str(), verdict.allSameProcess,
                                            linksText(verdict, state_.ranks()).c_str(), verdict.computeCapability,
                                            config.maxBytes, state_.block_->layout().totalBytes, outcome.firstTaken,
                                            tuningNote(verdict, state_.ranks(), config.table.get()).c_str()));
}

void CommState::Locked::followAgreement(bool giveUp, const std::string& whyGiveUp) {
  if (phase() != CommPhase::Agreeing) return;
  if (!giveUp) {
    follow(state_.agreement_->poll());
    return;
  }
  const CallSwitch::Outcome outcome = state_.agreement_->giveUp();
  if (outcome.state == CallSwitch::State::Never) {
    state_.agreement_.reset();
    becomeIneligible(IneligibleCause::NotAgreed, whyGiveUp);
    return;
  }
  follow(outcome);
}

bool CommState::Locked::becomeIneligible(IneligibleCause cause, const std::string& reason) {
  if (phase() != phaseBefore(cause) || !state_.moveTo(CommPhase::Ineligible)) return false;
  state_.reason_ = reason;
  switch (cause) {
    case IneligibleCause::NoSetUp:
      // Its rank and size stay unknown: a communicator whose creation failed is not safe to query.
      CAR_INFO(-1, "{}", logText(formatSetupNotEligible, describe(state_).c_str(), reason.c_str()));
      break;
    case IneligibleCause::Verdict:
    case IneligibleCause::NotAgreed:
      CAR_INFO(state_.device(), "{}", logText(formatSetupNotEligible, describe(state_).c_str(), reason.c_str()));
      break;
    case IneligibleCause::NcclBroken:
      CAR_INFO(state_.device(), "{}: {}; its all-reduces go to NCCL from now on", describe(state_), reason);
      break;
    case IneligibleCause::LaunchFailed:
      CAR_WARN(state_.device(), "{}: {}; this communicator now forwards every all-reduce to NCCL",
               describe(state_), reason);
      break;
  }
  return true;
}

std::optional<CommPhase> CommState::Locked::release() {
  const CommPhase before = phase();
  if (!state_.moveTo(CommPhase::Released)) return std::nullopt;
  return before;
}

bool CommState::Locked::takesCall(std::optional<ForwardReason>* reason) {
  const std::uint64_t call = state_.calls_++;
  if (phase() == CommPhase::Agreeing) follow(state_.agreement_->beforeCall(call));
  std::optional<ForwardReason> forwarded;
  switch (phase()) {
    case CommPhase::Pending:
    case CommPhase::SettingUp:
    case CommPhase::Agreeing: forwarded = ForwardReason::NotReady; break;
    case CommPhase::Ready:
      // Every rank forwards the calls before the agreed one.
      if (call < state_.firstTaken_) forwarded = ForwardReason::NotReady;
      else if (state_.stopRequested()) forwarded = ForwardReason::NotEligible;
      break;
    case CommPhase::Ineligible: forwarded = ForwardReason::NotEligible; break;
    case CommPhase::Released: return false;
  }
  if (!forwarded) return true;
  state_.counters_.countForwarded(*forwarded);
  if (reason != nullptr) *reason = forwarded;
  return false;
}

bool CommState::Locked::takesDeferredCall() {
  if (phase() == CommPhase::Ready && !state_.stopRequested()) return true;
  if (phase() != CommPhase::Released) state_.counters_.countForwarded(ForwardReason::NotEligible);
  return false;
}

std::unique_ptr<BufferBlock> CommState::Locked::takeBlock() {
  if (state_.agreement_) state_.agreement_->giveUp();
  state_.agreement_.reset();
  return std::move(state_.block_);
}

std::unique_ptr<RankEngine> CommState::Locked::takeEngine() {
  std::lock_guard<std::mutex> lock(state_.engineMutex_);
  return std::move(state_.engine_);
}

std::string describe(const CommState& state) {
  return logText(formatCommName, static_cast<const void*>(state.comm()), state.rank(), state.ranks());
}

}  // namespace car
