// The exported NCCL functions. Each one is a thin boundary: find the real NCCL, call it
// with exactly the caller's arguments, and around that call adopt, set up, use or
// release our side of the communicator. Nothing escapes as an exception.
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "lifecycle/group_calls.h"
#include "lifecycle/let_go.h"
#include "log.h"
#include "exports/nccl_types.h"
#include "exports/pointer_check.h"
#include "exports/real_nccl.h"
#include "lifecycle/registry.h"
#include "lifecycle/release.h"
#include "lifecycle/setup.h"
#include "exports/shim_config.h"

#define CAR_EXPORT extern "C" __attribute__((visibility("default")))

namespace car {
namespace {

// Runs our side of a hook. Our failures never reach the caller: they are logged, and the
// real NCCL's result is what the caller sees.
template <typename Body>
void guarded(const char* where, Body&& body) {
  try {
    body();
  } catch (const std::exception& error) {
    CAR_WARN(-1, "{}: internal error ({}); continuing with NCCL alone for this call", where, error.what());
  } catch (...) {
    CAR_WARN(-1, "{}: internal error; continuing with NCCL alone for this call", where);
  }
}

// A hook of a function older NCCLs lack: true when the real NCCL has none (the hook then
// returns ncclInvalidUsage; one WARN per function names it).
template <typename Function>
bool lacks(const RealNccl& real, Function function, const char* name) {
  if (function != nullptr) return false;
  reportMissing(real, name);
  return true;
}

bool passThrough() { return shimConfig().disable; }

// NCCL_COMM_BLOCKING=0 makes communicators without an explicit setting nonblocking.
bool defaultNonblocking() {
  const char* value = std::getenv("NCCL_COMM_BLOCKING");
  return value != nullptr && std::strcmp(value, "0") == 0;
}

bool isNonblocking(const ncclConfig_t* config, bool inherited) {
  if (config != nullptr && config->blocking != NCCL_CONFIG_UNDEF_INT) return config->blocking == 0;
  return inherited;
}

bool succeededOrPending(ncclResult_t result) { return result == ncclSuccess || result == ncclInProgress; }

// How a new communicator reaches the caller: at once (init), or, for a split or shrink,
// written into *newcomm by NCCL when the child is complete.
enum class Birth { Init, Child };

void adoptAndSchedule(const RealNccl& real, ncclResult_t result, ncclComm_t* comms, int count, bool nonblocking,
                      Birth birth = Birth::Init) {
  if (passThrough() || !succeededOrPending(result) || comms == nullptr) return;
  guarded("communicator setup", [&] {
    if (birth == Birth::Child && (nonblocking || result == ncclInProgress)) {
      // NCCL writes a nonblocking child from its own thread, whenever it is complete: read now
      // (or at the group's end) it is NULL on one rank and set on another, and ranks that
      // disagree on whether it is ours would wait for each other. None of them takes it.
      CAR_INFO(-1, "a nonblocking ncclCommSplit/ncclCommShrink child is not ours: NCCL hands it out later, from "
                   "its own thread; its all-reduces go to NCCL (not counted)");
      return;
    }
    std::vector<std::shared_ptr<Communicator>> states;
    for (int i = 0; i < count; ++i) {
      if (comms[i] != nullptr) {
        states.push_back(adoptCommunicator(comms[i], nonblocking || result == ncclInProgress));
      } else if (birth == Birth::Child && insideGroup()) {
        adoptAtGroupEnd(&comms[i]);  // NCCL fills it in at the group's end
      }
    }
    scheduleSetup(real, states);
  });
}

bool parentNonblocking(ncclComm_t parent) {
  std::shared_ptr<Communicator> comm = Registry::instance().find(parent);
  return comm ? comm->nonblocking() : defaultNonblocking();
}

// A call refused because an abort, destroy or finalize from another thread has the communicator.
ncclResult_t refuse(Communicator& comm, Collective collective) {
  if (comm.firstRefusal()) {
    CAR_WARN(comm.device(), "{}: an {} while another thread aborts, destroys or finalizes this communicator; "
             "not passed to NCCL, which may have freed it (ncclInvalidUsage)", describe(comm), collectiveName(collective));
  }
  return ncclInvalidUsage;
}

// NCCL_CAR_DETERMINISTIC promises invariance for the calls we take; NCCL promises none. The
// first call of a communicator forwarded for each reason says so, once (callers ask only
// under NCCL_CAR_DETERMINISTIC). Not said: integers
// (exact in any order), all-gathers and one rank (copies), calls NCCL refuses or that reduce
// nothing.
void warnInvarianceEnds(Communicator* comm, ForwardReason reason, Collective collective, std::size_t count,
                        ncclDataType_t type, ncclRedOp_t op) {
  if (!reduces(collective)) return;
  const std::optional<ElementType> element = elementTypeOf(type);
  if (invariantOnNccl(element)) return;
  if (reason == ForwardReason::Empty || reason == ForwardReason::Type) return;
  if (comm != nullptr && comm->ranks() == 1) return;
  static std::atomic<std::uint32_t> unadopted{0};  // communicators we have no state for
  std::atomic<std::uint32_t>& warned = comm != nullptr ? comm->invarianceWarned() : unadopted;
  const std::uint32_t bit = 1u << static_cast<int>(reason);
  if ((warned.fetch_or(bit) & bit) != 0) return;
  const std::string who = comm != nullptr ? describe(*comm) : std::string("a communicator the library did not adopt");
  CAR_WARN(comm != nullptr ? comm->device() : -1, "{}",
           logText(formatInvarianceEnds, who.c_str(), forwardReasonName(reason), collectiveName(collective),
                   static_cast<unsigned long long>(count), element ? elementTypeName(*element) : "?",
                   reduceOpOf(op) ? reduceOpName(*reduceOpOf(op)) : "op"));
}

// An option of ours in a call's config that names nothing: said once per process.
void warnUnknownOption(const Communicator& comm, const char* value) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::string names = "auto, nccl";
  for (const AlgorithmSpec& row : kAlgorithms) names += std::string(", ") + row.name;
  CAR_WARN(comm.device(), "{}: a per-call config: our kernel option (vendorId 0x636172, optionId 1) is \"{}\", "
           "which names no kernel ({}); the rule chooses; said once", describe(comm), value, names);
}

// What this rank reads about a call before the communicator decides it: where the buffers
// lie, the call's plan, and NCCL's own answers (is the communicator broken, would it refuse a
// pointer). Only where the call may be ours: a communicator still in its set-up or set up,
// and a call its plan, where already known, makes ours.
CallContext contextOf(const RealNccl& real, const Config& config, Communicator& comm, CollectiveCall* call,
                      bool inGroup) {
  CallContext context;
  context.insideGroup = inGroup;
  const CommPhase phase = comm.phase();
  if (phase != CommPhase::SettingUp && phase != CommPhase::Agreeing && phase != CommPhase::Ready) return context;
  if (config.symmetricNcclBytes > 0 && call->type && call->collective == Collective::AllReduce) {
    call->symmetricBuffers =
        comm.symmetricWindows().containBoth(call->send, call->recv, call->count * elementBytes(*call->type));
  }
  if (const PlanBasis* basis = comm.planBasis()) {
    context.plan = planCall(basis->facts, *call, basis->config);
    if (!context.plan->ours) return context;
  }
  ncclResult_t async = ncclSuccess;
  const ncclResult_t query = real.commGetAsyncError(comm.comm(), &async);
  if (!ncclAllowsOurKernel(query, async)) {
    context.ncclBroken = real.getErrorString(query != ncclSuccess ? query : async);
  }
  if (ncclChecksPointers()) {
    context.pointersRefused = !(passesNcclPointerCheck(call->send, comm.device()) &&
                                passesNcclPointerCheck(call->recv, comm.device()));
  }
  return context;
}

// The real NCCL's function for a call of `collective`, with exactly the caller's arguments:
// its per-call config form when the call came with a config (the hook of that form checked
// that the real NCCL has it), the plain one otherwise.
ncclResult_t forwardToNccl(const RealNccl& real, Collective collective, const void* send, void* recv,
                           std::size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream, const CollConfig* config) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
  if (config != nullptr) {
    switch (collective) {
      case Collective::AllReduce: return real.allReduceConfig(send, recv, count, type, op, comm, stream, config);
      case Collective::AllGather: return real.allGatherConfig(send, recv, count, type, comm, stream, config);
      case Collective::ReduceScatter:
        return real.reduceScatterConfig(send, recv, count, type, op, comm, stream, config);
      case Collective::kCount: break;
    }
    return ncclInternalError;
  }
#else
  (void)config;
#endif
  switch (collective) {
    case Collective::AllReduce: return real.allReduce(send, recv, count, type, op, comm, stream);
    case Collective::AllGather: return real.allGather(send, recv, count, type, comm, stream);
    case Collective::ReduceScatter: return real.reduceScatter(send, recv, count, type, op, comm, stream);
    case Collective::kCount: break;
  }
  return ncclInternalError;
}

// A forwarded call NCCL answered: one it refused never entered the communicator's sequence
// and is not counted (outside a group; a group's calls are noted, and settled at its end),
// and one it accepted tells a set-up waiting for NCCL's thread that it has launched the
// exchange (Communicator::noteNcclAccepted). The call that carried the exchange tells nothing.
void afterForward(const std::shared_ptr<Communicator>& comm, const Decision& decision, ncclResult_t result,
                  bool carriedExchange, bool inGroup) {
  if (decision.route == Decision::Route::Released) return;
  if (inGroup) {
    noteGroupCall(comm, decision);
  } else if (!succeededOrPending(result)) {
    comm->giveBack(decision);
    return;
  }
  if (!carriedExchange && succeededOrPending(result) && comm->phase() == CommPhase::SettingUp) {
    comm->noteNcclAccepted();
  }
}

// A hooked collective, whole: ours when its communicator's decision says so, else the real
// NCCL's with the caller's arguments. `name` names the hook in our logs.
ncclResult_t hookCollective(const char* name, Collective collective, const void* send, void* recv,
                            std::size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream, const CollConfig* config = nullptr) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  const auto forward = [&] { return forwardToNccl(*real, collective, send, recv, count, type, op, comm, stream, config); };
  const Config& settings = shimConfig();
  if (settings.disable) return forward();
  // Good for this call: this thread looks nothing else up until it returns.
  const std::shared_ptr<Communicator>* found = nullptr;
  guarded(name, [&] { found = &Registry::instance().find(comm); });
  if (found == nullptr || !*found) {
    if (settings.deterministic) {
      guarded(name, [&] { warnInvarianceEnds(nullptr, ForwardReason::NotEligible, collective, count, type, op); });
    }
    return forward();
  }
  const std::shared_ptr<Communicator>& adopted = *found;
  if (adopted->gate().closed()) {
    ncclResult_t refused = ncclInvalidUsage;
    guarded(name, [&] { refused = refuse(*adopted, collective); });
    return refused;
  }
  if (adopted->forwardedAsIneligible()) {
    Decision decision;
    decision.reason = adopted->ineligibleReason();
    if (settings.deterministic) {
      guarded(name, [&] { warnInvarianceEnds(adopted.get(), decision.reason, collective, count, type, op); });
    }
    const ncclResult_t result = forward();
    guarded(name, [&] { afterForward(adopted, decision, result, false, insideGroup()); });
    return result;
  }
  const bool inGroup = insideGroup();
  Decision decision;
  decision.route = Decision::Route::Released;  // should our side throw: NCCL's, uncounted
  bool setUpHere = false;
  guarded(name, [&] {
    CollectiveCall call = collectiveCallOf(collective, send, recv, count, type, op, stream);
    const char* unknownOption = nullptr;
    if (applyCollConfig(config, &call, &unknownOption) == ConfigVerdict::ForNccl) call.ncclRequested = true;
    if (unknownOption != nullptr) warnUnknownOption(*adopted, unknownOption);
    setUpHere = !inGroup && setUpAtCall(*adopted, stream);
    const CallContext context = contextOf(*real, settings, *adopted, &call, inGroup);
    Holdings letGo;
    decision = adopted->decide(call, context, &letGo);
    if (letGo) disposeInBackground(std::move(letGo), describe(*adopted));
    if (decision.route == Decision::Route::Deferred) {
      noteGroupCall(adopted, decision);
      deferToGroupEnd({adopted, call, decision.plan, type, op, copyOf(config)});
    } else if (decision.route == Decision::Route::Nccl && settings.deterministic) {
      warnInvarianceEnds(adopted.get(), decision.reason, collective, count, type, op);
    }
  });
  if (decision.route == Decision::Route::Ours || decision.route == Decision::Route::Deferred) return ncclSuccess;
  ncclResult_t result = ncclSuccess;
  bool issued = false;
  if (setUpHere) {
    // The communicator's set-up point: its exchange goes to NCCL with this call.
    guarded(name, [&] {
      result = setUpWithCall(*real, adopted, [&] {
        issued = true;
        return forward();
      });
    });
  }
  if (!issued) result = forward();
  guarded(name, [&] { afterForward(adopted, decision, result, setUpHere, inGroup); });
  return result;
}

// A kept call our side could not launch at the group's end: NCCL's now, after the group.
ncclResult_t forwardAfterGroup(const RealNccl& real, const DeferredCall& deferred) {
  const CollectiveCall& call = deferred.call;
  return forwardToNccl(real, call.collective, call.send, call.recv, call.count, deferred.datatype, deferred.op,
                       deferred.comm->comm(), call.stream, deferred.config.get());
}

// Waits until NCCL has launched the group that `comm` was in (its state leaves ncclInProgress),
// as a caller of a nonblocking group must before using the communicator. False when NCCL
// reports an error (the caller sees it from NCCL) or an abort took it.
bool groupLaunched(const RealNccl& real, Communicator& comm) {
  ncclResult_t async = ncclInProgress;
  ncclResult_t query = ncclSuccess;
  while (query == ncclSuccess && async == ncclInProgress) {
    if (!comm.gate().pass([&] { query = real.commGetAsyncError(comm.comm(), &async); })) return false;
    if (async == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (query == ncclSuccess && async == ncclSuccess) return true;
  CAR_INFO(comm.device(), "{}: a call of ours in a group not run: NCCL reports the group failed", describe(comm));
  return false;
}

// A call of ours that waited for its group's end, which has run: on the stream now, unless
// an abort from another thread took the communicator meanwhile (then nothing runs, as NCCL
// runs nothing on it: Released). Nccl: our side cannot take it after all; NCCL must.
Decision::Route launchDeferred(const DeferredCall& deferred) {
  Communicator& comm = *deferred.comm;
  if (!comm.gate().closed()) {
    const Decision decision = comm.lock().launchDeferred(deferred.call, deferred.plan);
    if (decision.route != Decision::Route::Released) return decision.route;
  }
  CAR_WARN(comm.device(), "{}: an {} of a group not run: the communicator was aborted, destroyed or finalized "
           "before the group ended", describe(comm), collectiveName(deferred.call.collective));
  return Decision::Route::Released;
}

// At the end of the thread's outermost group: the calls of ours it kept run when the group
// ran (ncclSuccess, or ncclInProgress with nonblocking members), and none when it failed or
// was only simulated; then none of the group's calls entered their communicators' sequences,
// and their places are given back. Returns the group's result, or the error of a call that
// NCCL had to take over from us and refused.
ncclResult_t endGroupCalls(const RealNccl& real, ncclResult_t groupResult, bool simulated) {
  GroupCalls group = takeGroupCalls();
  if (simulated || !succeededOrPending(groupResult)) {
    // The latest first, so that each communicator ends at its first place in the group.
    for (auto it = group.decided.rbegin(); it != group.decided.rend(); ++it) {
      if (Registry::instance().holds(it->comm)) it->comm->giveBack(it->decision);
    }
  }
  std::vector<DeferredCall>& calls = group.deferred;
  // Not run in a fork()ed child on the communicators it inherited: our kernels and buffers
  // there are the parent's (lifecycle/registry.h).
  calls.erase(std::remove_if(calls.begin(), calls.end(),
                             [](const DeferredCall& deferred) { return !Registry::instance().holds(deferred.comm); }),
              calls.end());
  if (calls.empty()) return groupResult;
  if (simulated || !succeededOrPending(groupResult)) {
    CAR_INFO(-1, "{} call(s) of ours in a group {}: not run, as NCCL runs none of it", calls.size(),
             simulated ? "ended by ncclGroupSimulateEnd" : "whose end failed");
    return groupResult;
  }
  ncclResult_t result = groupResult;
  for (const DeferredCall& deferred : calls) {
    // A group with nonblocking members ends ncclInProgress, and NCCL launches even its blocking
    // members' calls later, from its own thread: ours go after them, on every rank alike.
    if (groupResult == ncclInProgress && !groupLaunched(real, *deferred.comm)) continue;
    Decision::Route route = Decision::Route::Released;  // should our side throw, nothing is sent to NCCL
    guarded("ncclGroupEnd", [&] { route = launchDeferred(deferred); });
    if (route != Decision::Route::Nccl) continue;
    const ncclResult_t forwarded = forwardAfterGroup(real, deferred);
    if (forwarded != ncclSuccess && result == ncclSuccess) result = forwarded;
  }
  return result;
}

}  // namespace
}  // namespace car

using namespace car;

CAR_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return hookCollective("ncclAllReduce", Collective::AllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream);
}

CAR_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                      ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return hookCollective("ncclAllGather", Collective::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum,
                        comm, stream);
}

CAR_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                          cudaStream_t stream) {
  return hookCollective("ncclReduceScatter", Collective::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op,
                        comm, stream);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
// The per-call config forms: taken under the plain call's rule, the config applied
// (shim/exports/nccl_types.h: applyCollConfig); forwarded with the config untouched.
CAR_EXPORT ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                            cudaStream_t stream, const ncclCollConfig_t* config) {
  const RealNccl* real = realNccl();
  if (real != nullptr && lacks(*real, real->allReduceConfig, "ncclAllReduceConfig")) return ncclInvalidUsage;
  return hookCollective("ncclAllReduceConfig", Collective::AllReduce, sendbuff, recvbuff, count, datatype, op, comm,
                        stream, config);
}

CAR_EXPORT ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                            const ncclCollConfig_t* config) {
  const RealNccl* real = realNccl();
  if (real != nullptr && lacks(*real, real->allGatherConfig, "ncclAllGatherConfig")) return ncclInvalidUsage;
  return hookCollective("ncclAllGatherConfig", Collective::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum,
                        comm, stream, config);
}

CAR_EXPORT ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                cudaStream_t stream, const ncclCollConfig_t* config) {
  const RealNccl* real = realNccl();
  if (real != nullptr && lacks(*real, real->reduceScatterConfig, "ncclReduceScatterConfig")) return ncclInvalidUsage;
  return hookCollective("ncclReduceScatterConfig", Collective::ReduceScatter, sendbuff, recvbuff, recvcount, datatype,
                        op, comm, stream, config);
}
#endif

CAR_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  const ncclResult_t result = real->commInitRank(comm, nranks, commId, rank);
  adoptAndSchedule(*real, result, comm, 1, defaultNonblocking());
  return result;
}

CAR_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                               ncclConfig_t* config) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commInitRankConfig, "ncclCommInitRankConfig")) return ncclInvalidUsage;
  const ncclResult_t result = real->commInitRankConfig(comm, nranks, commId, rank, config);
  adoptAndSchedule(*real, result, comm, 1, isNonblocking(config, defaultNonblocking()));
  return result;
}

CAR_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                 ncclUniqueId* commIds, ncclConfig_t* config) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commInitRankScalable, "ncclCommInitRankScalable")) return ncclInvalidUsage;
  const ncclResult_t result = real->commInitRankScalable(newcomm, nranks, myrank, nId, commIds, config);
  adoptAndSchedule(*real, result, newcomm, 1, isNonblocking(config, defaultNonblocking()));
  return result;
}

CAR_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  const ncclResult_t result = real->commInitAll(comms, ndev, devlist);
  adoptAndSchedule(*real, result, comms, ndev, false);
  return result;
}

CAR_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commSplit, "ncclCommSplit")) return ncclInvalidUsage;
  const bool nonblocking = isNonblocking(config, passThrough() ? false : parentNonblocking(comm));
  const ncclResult_t result = real->commSplit(comm, color, key, newcomm, config);
  adoptAndSchedule(*real, result, newcomm, 1, nonblocking, Birth::Child);
  return result;
}

CAR_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                       ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commShrink, "ncclCommShrink")) return ncclInvalidUsage;
  const bool nonblocking = isNonblocking(config, passThrough() ? false : parentNonblocking(comm));
  // NCCL_SHRINK_ABORT ends the parent's operations in flight: ours first, as an abort does.
  if ((shrinkFlags & NCCL_SHRINK_ABORT) != 0 && !passThrough()) {
    guarded("ncclCommShrink", [&] { stopBeforeNccl(comm, "ncclCommShrink(NCCL_SHRINK_ABORT)"); });
  }
  const ncclResult_t result = real->commShrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  adoptAndSchedule(*real, result, newcomm, 1, nonblocking, Birth::Child);
  return result;
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
// Ranks joining a communicator, and those already in it, get a new one: set up like a split's
// child, on every rank right after the call, when its config says blocking = 1. Without that,
// the ranks already in take the parent's mode and the joining ones NCCL's default, which can
// differ: a rank that set the communicator up would wait in our exchange for peers that never
// come. Nonblocking, or not said: never ours.
CAR_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                     ncclComm_t* newcomm, ncclConfig_t* config) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commGrow, "ncclCommGrow")) return ncclInvalidUsage;
  const ncclResult_t result = real->commGrow(comm, nRanks, uniqueId, rank, newcomm, config);
  if (config != nullptr && config->blocking == 1) {
    adoptAndSchedule(*real, result, newcomm, 1, false, Birth::Child);
  } else if (!passThrough() && succeededOrPending(result)) {
    CAR_INFO(-1, "ncclCommGrow whose config does not set blocking = 1: the grown communicator is not ours "
                 "(nonblocking, or the ranks already in and the joining ones could disagree on its mode); its "
                 "all-reduces go to NCCL");
  }
  return result;
}
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 7)
// Suspending hands the communicator's memory back; ours goes with it, for good
// (lifecycle/release.h). NCCL then answers the calls made while it is suspended.
CAR_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commSuspend, "ncclCommSuspend")) return ncclInvalidUsage;
  if (!passThrough()) guarded("ncclCommSuspend", [&] { releaseForSuspend(comm); });
  return real->commSuspend(comm, flags);
}
#endif

CAR_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commFinalize, "ncclCommFinalize")) return ncclInvalidUsage;
  bool forward = true;
  guarded("ncclCommFinalize", [&] { forward = releaseBeforeNccl(comm, ReleaseKind::Finalize); });
  return forward ? real->commFinalize(comm) : ncclSuccess;
}

CAR_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  bool forward = true;
  guarded("ncclCommDestroy", [&] { forward = releaseBeforeNccl(comm, ReleaseKind::Destroy); });
  return forward ? real->commDestroy(comm) : ncclSuccess;
}

CAR_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  std::shared_ptr<Communicator> state;
  guarded("ncclCommAbort", [&] { state = beginAbort(comm); });
  const ncclResult_t result = real->commAbort(comm);
  if (state) guarded("ncclCommAbort", [&] { finishAbort(state); });
  return result;
}

CAR_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commRevoke, "ncclCommRevoke")) return ncclInvalidUsage;
  if (!passThrough()) guarded("ncclCommRevoke", [&] { stopBeforeNccl(comm, "ncclCommRevoke"); });
  return real->commRevoke(comm, revokeFlags);
}

CAR_EXPORT ncclResult_t ncclGroupStart() {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  noteGroupStart();
  const ncclResult_t result = real->groupStart();
  if (result != ncclSuccess) noteGroupStartFailed();
  return result;
}

CAR_EXPORT ncclResult_t ncclGroupEnd() {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  const ncclResult_t result = real->groupEnd();
  guarded("ncclGroupEnd", [&] { noteGroupEnd(*real, result); });
  if (insideGroup()) return result;
  ncclResult_t ended = result;
  guarded("ncclGroupEnd", [&] { ended = endGroupCalls(*real, result, false); });
  return ended;
}

CAR_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->groupSimulateEnd, "ncclGroupSimulateEnd")) return ncclInvalidUsage;
  const ncclResult_t result = real->groupSimulateEnd(simInfo);
  guarded("ncclGroupSimulateEnd", [&] { noteGroupSimulateEnd(); });
  if (insideGroup()) return result;
  ncclResult_t ended = result;
  guarded("ncclGroupSimulateEnd", [&] { ended = endGroupCalls(*real, result, true); });
  return ended;
}

// Symmetric windows: NCCL's own; we only note where they are, for NCCL_CAR_SYMMETRIC_NCCL_BYTES.
CAR_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                               int winFlags) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commWindowRegister, "ncclCommWindowRegister")) return ncclInvalidUsage;
  const ncclResult_t result = real->commWindowRegister(comm, buff, size, win, winFlags);
  if (result == ncclSuccess && win != nullptr && (winFlags & NCCL_WIN_COLL_SYMMETRIC) != 0 && !passThrough()) {
    guarded("ncclCommWindowRegister", [&] {
      if (auto state = Registry::instance().find(comm)) state->symmetricWindows().add(*win, buff, size);
    });
  }
  return result;
}

CAR_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  if (lacks(*real, real->commWindowDeregister, "ncclCommWindowDeregister")) return ncclInvalidUsage;
  if (!passThrough()) {
    guarded("ncclCommWindowDeregister", [&] {
      if (auto state = Registry::instance().find(comm)) state->symmetricWindows().remove(win);
    });
  }
  return real->commWindowDeregister(comm, win);
}
