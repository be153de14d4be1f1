#include "lifecycle/communicator.h"

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

// Whether no kernel of ours can have run on a communicator that leaves its phase for this
// cause: then it lets go of everything at once.
bool neverLaunched(IneligibleCause cause) {
  return cause == IneligibleCause::Verdict || cause == IneligibleCause::NotAgreed;
}

constexpr const char* kAnotherRankGaveUp =
    "another rank gave up its set-up before the ranks agreed on a first call (its log says why)";

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
    case CommPhase::Pending: return from == CommPhase::SettingUp;
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

Communicator::~Communicator() {
  // Only a released communicator is forgotten; should one that still holds something go,
  // a kernel of ours may still use it: kept for good rather than freed under it.
  BufferBlock::abandon(std::move(block_));
  static_cast<void>(launcher_.release());
}

void Communicator::learnIdentity(int rank, int ranks, int device) {
  rank_.store(rank, std::memory_order_relaxed);
  device_.store(device, std::memory_order_relaxed);
  ranks_.store(ranks, std::memory_order_release);  // last: describe() reads it first
}

bool Communicator::requestStop() {
  std::lock_guard<std::mutex> lock(abortMutex_);
  stopRequested_.store(true);
  if (stoppable_ == nullptr) return false;
  stoppable_->raiseAbort();
  return true;
}

bool Communicator::moveTo(CommPhase to) {
  const CommPhase from = phase_.load(std::memory_order_relaxed);
  if (!phaseChangeAllowed(from, to)) return false;
  phase_.store(to, std::memory_order_release);
  return true;
}

void Communicator::setLauncher(std::unique_ptr<Launcher> launcher) {
  launcher_ = std::move(launcher);
  std::lock_guard<std::mutex> lock(abortMutex_);
  stoppable_ = launcher_.get();
  if (stoppable_ != nullptr && stopRequested_.load()) stoppable_->raiseAbort();
}

std::unique_ptr<Launcher> Communicator::takeLauncher() {
  {
    std::lock_guard<std::mutex> lock(abortMutex_);
    stoppable_ = nullptr;
  }
  return std::move(launcher_);
}

// ---- The call path.

Decision Communicator::Locked::forward(Decision decision, ForwardReason reason) {
  comm_.counters_.countForwarded(reason);
  decision.route = Decision::Route::Nccl;
  decision.reason = reason;
  return decision;
}

Decision Communicator::Locked::decide(const CollectiveCall& call, const CallContext& context, Holdings* letGo) {
  Decision decision;
  if (phase() == CommPhase::Released) {
    decision.route = Decision::Route::Released;
    return decision;
  }
  decision.index = comm_.calls_++;
  decision.placed = true;
  if (phase() == CommPhase::Agreeing) follow(comm_.agreement_->beforeCall(decision.index), kAnotherRankGaveUp, letGo);
  switch (phase()) {
    case CommPhase::Pending:
    case CommPhase::SettingUp:
    case CommPhase::Agreeing: return forward(decision, ForwardReason::NotReady);
    case CommPhase::Ineligible: return forward(decision, comm_.ineligibleReason());
    case CommPhase::Released: decision.route = Decision::Route::Released; return decision;
    case CommPhase::Ready: break;
  }
  // Every rank forwards the calls before the agreed one.
  if (decision.index < comm_.firstTaken_) return forward(decision, ForwardReason::NotReady);
  if (comm_.stopRequested()) return forward(decision, ForwardReason::NotEligible);
  const PlanBasis& basis = *comm_.planBasis_.load(std::memory_order_relaxed);  // set before Agreeing
  decision.plan = context.plan ? *context.plan : planCall(basis.facts, call, basis.config);
  if (!decision.plan.ours) return forward(decision, decision.plan.reason);
  if (!context.ncclBroken.empty()) {
    becomeIneligible(IneligibleCause::NcclBroken, "NCCL reports the communicator broken: " + context.ncclBroken,
                     letGo);
    return forward(decision, ForwardReason::NotEligible);
  }
  if (context.pointersRefused) return forward(decision, ForwardReason::PointerCheck);
  // On a nonblocking communicator NCCL launches a group later, from its own thread: ours
  // could land before NCCL's on one rank and after them on another.
  if (context.insideGroup && comm_.nonblocking_) return forward(decision, ForwardReason::NonblockingGroup);
  if (context.insideGroup) {
    decision.route = Decision::Route::Deferred;  // counted when it runs
    return decision;
  }
  return launch(decision, call);
}

Decision Communicator::Locked::launchDeferred(const CollectiveCall& call, const CallPlan& plan) {
  Decision decision;
  decision.plan = plan;
  if (phase() == CommPhase::Released) {
    decision.route = Decision::Route::Released;
    return decision;
  }
  if (phase() != CommPhase::Ready || comm_.stopRequested()) return forward(decision, ForwardReason::NotEligible);
  return launch(decision, call);
}

Decision Communicator::Locked::launch(Decision decision, const CollectiveCall& call) {
  Launcher& launcher = *comm_.launcher_;
  const CallPlan& plan = decision.plan;
  bool launched = false;
  const cudaError_t error = launcher.launch(call, plan, &launched);
  if (error != cudaSuccess) {
    // It keeps what it holds until its release: a kernel of ours ran on it, and may be running.
    becomeIneligible(IneligibleCause::LaunchFailed, std::string("our launch failed: ") + cudaGetErrorString(error),
                     nullptr);
  }
  if (!launched) return forward(decision, ForwardReason::Failed);
  comm_.counters_.countTaken(plan.algorithm, plan.bytes);
  CAR_TRACE(comm_.device(), "{}",
            logText(formatTakenCall, launcher.rank(), collectiveName(call.collective), call.count,
                    elementTypeName(*call.type), reduces(call.collective) ? reduceOpName(*call.op) : nullptr,
                    plan.bytes, algorithmName(plan.algorithm)));
  decision.route = Decision::Route::Ours;
  return decision;
}

void Communicator::Locked::giveBack(const Decision& refused) {
  if (!refused.placed || refused.index >= comm_.calls_) return;  // given back already
  comm_.calls_ = refused.index;
  if (refused.route == Decision::Route::Nccl) comm_.counters_.uncountForwarded(refused.reason);
}

// ---- The set-up.

bool Communicator::Locked::beginSetUp() { return comm_.moveTo(CommPhase::SettingUp); }

void Communicator::Locked::exchangeRefused() {
  if (phase() == CommPhase::SettingUp) comm_.moveTo(CommPhase::Pending);
}

std::unique_ptr<Launcher> Communicator::Locked::installLauncher(std::unique_ptr<Launcher> launcher) {
  if (phase() != CommPhase::SettingUp) return launcher;
  comm_.setLauncher(std::move(launcher));
  return nullptr;
}

bool Communicator::Locked::beginAgreeing(std::unique_ptr<BufferBlock>* block, const std::vector<void*>& bases,
                                         const Verdict& verdict, std::unique_ptr<CallSwitch> agreement,
                                         Holdings* letGo) {
  if (!comm_.launcher_ || !*block || !agreement || phase() != CommPhase::SettingUp) {
    CAR_WARN(comm_.device(), "{}: internal error: cannot become ready from phase {}; its calls go to NCCL",
             describe(comm_), phaseName(phase()));
    if (agreement) agreement->giveUp();
    letGo->launcher = comm_.takeLauncher();
    return false;
  }
  comm_.launcher_->attachPeers(bases.data(), (*block)->layout());
  comm_.verdict_ = verdict;
  if (!comm_.planBasisOwned_) {
    const Launcher& launcher = *comm_.launcher_;
    comm_.planBasisOwned_ = std::make_unique<const PlanBasis>(
        PlanBasis{{launcher.ranks(), verdict.fullNvlink, verdict.computeCapability}, launcher.config()});
    comm_.planBasis_.store(comm_.planBasisOwned_.get(), std::memory_order_release);
  }
  comm_.block_ = std::move(*block);
  comm_.agreement_ = std::move(agreement);
  comm_.moveTo(CommPhase::Agreeing);
  follow(comm_.agreement_->joinReady(comm_.calls_), kAnotherRankGaveUp, letGo);
  return true;
}

void Communicator::Locked::follow(const CallSwitch::Outcome& outcome, const std::string& whyNever,
                                  Holdings* letGo) {
  if (phase() != CommPhase::Agreeing || outcome.state == CallSwitch::State::Undecided) return;
  if (outcome.state == CallSwitch::State::Never) {
    becomeIneligible(IneligibleCause::NotAgreed, whyNever, letGo);
    return;
  }
  comm_.agreement_.reset();  // it read the block's boards; the decision is final
  comm_.firstTaken_ = outcome.firstTaken;
  comm_.moveTo(CommPhase::Ready);
  const Verdict& verdict = comm_.verdict_;
  const Config& config = comm_.launcher_->config();
  const std::string note = tuningNote(verdict, comm_.ranks(), config.table.get(), config.algorithm);
  CAR_INFO(comm_.device(), "{}", logText(formatSetupEligible, describe(comm_).c_str(), verdict.allSameProcess,
                                           linksText(verdict, comm_.ranks()).c_str(), verdict.computeCapability,
                                           config.maxBytes, comm_.block_->layout().totalBytes, outcome.firstTaken,
                                           note.c_str()));
}

void Communicator::Locked::followAgreement(bool giveUp, const std::string& whyGiveUp, Holdings* letGo) {
  if (phase() != CommPhase::Agreeing) return;
  if (!giveUp) {
    follow(comm_.agreement_->poll(), kAnotherRankGaveUp, letGo);
    return;
  }
  follow(comm_.agreement_->giveUp(), whyGiveUp, letGo);
}

void Communicator::Locked::letGoOfEverything(Holdings* letGo) {
  if (comm_.agreement_) comm_.agreement_->giveUp();  // the peers stop waiting for this rank
  comm_.agreement_.reset();                          // before the boards it reads go
  Holdings held;
  held.block = std::move(comm_.block_);
  held.launcher = comm_.takeLauncher();
  if (letGo != nullptr) {
    *letGo = std::move(held);
  } else {
    // Nobody to hand it to (a caller that never lets go): kept for good, never freed under a kernel.
    BufferBlock::abandon(std::move(held.block));
    static_cast<void>(held.launcher.release());
  }
}

bool Communicator::Locked::becomeIneligible(IneligibleCause cause, const std::string& reason, Holdings* letGo,
                                            ForwardReason countedAs) {
  if (phase() != phaseBefore(cause) || !phaseChangeAllowed(phase(), CommPhase::Ineligible)) return false;
  // Before the phase: a call that sees Ineligible without the lock counts it.
  comm_.ineligibleReason_.store(countedAs, std::memory_order_relaxed);
  comm_.moveTo(CommPhase::Ineligible);
  comm_.reason_ = reason;
  if (neverLaunched(cause)) letGoOfEverything(letGo);
  switch (cause) {
    case IneligibleCause::NoSetUp:
      // Its rank and size stay unknown: a communicator whose creation failed is not safe to query.
      CAR_INFO(-1, "{}", logText(formatSetupNotEligible, describe(comm_).c_str(), reason.c_str()));
      break;
    case IneligibleCause::Verdict:
    case IneligibleCause::NotAgreed:
      CAR_INFO(comm_.device(), "{}", logText(formatSetupNotEligible, describe(comm_).c_str(), reason.c_str()));
      break;
    case IneligibleCause::NcclBroken:
      CAR_INFO(comm_.device(), "{}: {}; its calls go to NCCL from now on", describe(comm_), reason);
      break;
    case IneligibleCause::LaunchFailed:
      CAR_WARN(comm_.device(), "{}: {}; this communicator now forwards every call to NCCL", describe(comm_), reason);
      break;
  }
  return true;
}

// ---- The release.

std::optional<CommPhase> Communicator::Locked::release(Holdings* held) {
  const CommPhase before = phase();
  if (!comm_.moveTo(CommPhase::Released)) return std::nullopt;
  if (comm_.agreement_) comm_.agreement_->giveUp();
  comm_.agreement_.reset();
  held->block = std::move(comm_.block_);
  held->launcher = comm_.takeLauncher();
  return before;
}

std::string describe(const Communicator& comm) {
  return logText(formatCommName, static_cast<const void*>(comm.comm()), comm.rank(), comm.ranks());
}

}  // namespace car
