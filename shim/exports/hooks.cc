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

#include "lifecycle/comm_health.h"
#include "lifecycle/group_calls.h"
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
    std::vector<std::shared_ptr<CommState>> states;
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
  std::shared_ptr<CommState> state = Registry::instance().find(parent);
  return state ? state->nonblocking() : defaultNonblocking();
}

// Where a call of a collective we hook goes.
enum class Route {
  Ours,     // our kernel is on the stream
  Nccl,     // forwarded
  Refused,  // an abort, destroy or finalize from another thread has the communicator
};

Route refuse(CommState& state, Collective collective) {
  if (state.firstRefusal()) {
    CAR_WARN(state.device(), "{}: an {} while another thread aborts, destroys or finalizes this communicator; "
             "not passed to NCCL, which may have freed it (ncclInvalidUsage)", describe(state), collectiveName(collective));
  }
  return Route::Refused;
}

// NCCL_CAR_DETERMINISTIC promises invariance for the calls we take; NCCL promises none. The
// first call of a communicator forwarded for each reason says so, once. Not said: integers
// (exact in any order), all-gathers and one rank (copies), calls NCCL refuses or that reduce
// nothing.
void warnInvarianceEnds(CommState* state, ForwardReason reason, Collective collective, std::size_t count,
                        ncclDataType_t type, ncclRedOp_t op) {
  const std::optional<ElementType> element = elementTypeOf(type);
  if (!shimConfig().deterministic || !reduces(collective) || invariantOnNccl(element)) return;
  if (reason == ForwardReason::Empty || reason == ForwardReason::Type) return;
  if (state != nullptr && state->ranks() == 1) return;
  static std::atomic<std::uint32_t> unadopted{0};  // communicators we have no state for
  std::atomic<std::uint32_t>& warned = state != nullptr ? state->invarianceWarned() : unadopted;
  const std::uint32_t bit = 1u << static_cast<int>(reason);
  if ((warned.fetch_or(bit) & bit) != 0) return;
  const std::string call = fmt::format("{} x {} {}", count, element ? elementTypeName(*element) : "?",
                                       reduceOpOf(op) ? reduceOpName(*reduceOpOf(op)) : "op");
  CAR_WARN(state != nullptr ? state->device() : -1,
           "{}: NCCL_CAR_DETERMINISTIC: reductions forwarded to NCCL as {} (first: {} {}) get NCCL's result, whose "
           "bits may change with the message size and NCCL's algorithm: NCCL promises no invariance; said once per "
           "communicator and reason",
           state != nullptr ? describe(*state) : std::string("a communicator the library did not adopt"),
           forwardReasonName(reason), collectiveName(collective), call);
}

// Under the state's lock: whether our kernels may take a call now. A call they may not is
// counted here, where NCCL's side would not count it; *reason says why (none once released).
bool admits(const RealNccl& real, CommState& state, CommState::Locked& locked, ncclComm_t comm,
            std::optional<ForwardReason>* reason) {
  if (!locked.takesCall(reason)) return false;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t query = real.commGetAsyncError(comm, &async);
  if (!ncclAllowsOurKernel(query, async)) {
    const char* error = real.getErrorString(query != ncclSuccess ? query : async);
    locked.becomeIneligible(IneligibleCause::NcclBroken, std::string("NCCL reports the communicator broken: ") + error);
    state.counters().countForwarded(ForwardReason::NotEligible);
    *reason = ForwardReason::NotEligible;
    return false;
  }
  return true;
}

// The one fact of a call the policy reads that NCCL's arguments do not hold: whether both
// buffers lie in symmetric windows. Only looked at when the user asked for it: no lookup on
// the default path.
void noteSymmetricBuffers(CommState& state, CollectiveCall& call) {
  if (shimConfig().symmetricNcclBytes > 0 && call.type && call.collective == Collective::AllReduce) {
    call.symmetricBuffers =
        state.symmetricWindows().containBoth(call.send, call.recv, call.count * elementBytes(*call.type));
  }
}

// Hands a call the communicator admits to its engine. Should our side fail, the communicator
// forwards every later call.
SubmitResult submit(CommState& state, CommState::Locked& locked, const CollectiveCall& call) {
  const SubmitResult result = locked.engine()->submit(call);
  if (result.error != cudaSuccess) {
    locked.becomeIneligible(IneligibleCause::LaunchFailed,
                            std::string("our launch failed: ") + cudaGetErrorString(result.error));
  }
  return result;
}

// An option of ours in a call's config that names nothing: said once per process.
void warnUnknownOption(const CommState& state, const char* value) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::string names = "auto, nccl";
  for (const AlgorithmSpec& row : kAlgorithms) names += std::string(", ") + row.name;
  CAR_WARN(state.device(), "{}: a per-call config: our kernel option (vendorId 0x636172, optionId 1) is \"{}\", "
           "which names no kernel ({}); the rule chooses; said once", describe(state), value, names);
}

// One call of a collective we hook on a communicator we adopted (ncclAllReduce, ncclAllGather
// (op unused), ncclReduceScatter, and their per-call config forms), with its gate held.
Route routeCollective(const RealNccl& real, const std::shared_ptr<CommState>& state, Collective collective,
                      const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                      ncclComm_t comm, cudaStream_t stream, const CollConfig* config) {
  // Held until the call is on the stream.
  CommState::Locked locked = state->lock();
  std::optional<ForwardReason> refused;
  if (!admits(real, *state, locked, comm, &refused)) {
    if (refused) warnInvarianceEnds(state.get(), *refused, collective, count, type, op);
    return Route::Nccl;
  }
  if (ncclChecksPointers() &&
      !(passesNcclPointerCheck(send, state->device()) && passesNcclPointerCheck(recv, state->device()))) {
    state->counters().countForwarded(ForwardReason::PointerCheck);
    return Route::Nccl;
  }
  CollectiveCall call = collectiveCallOf(collective, send, recv, count, type, op, stream);
  noteSymmetricBuffers(*state, call);
  // Read only for a call we may take: NCCL judges a config it is given.
  const char* unknownOption = nullptr;
  if (applyCollConfig(config, &call, &unknownOption) == ConfigVerdict::ForNccl) call.ncclRequested = true;
  if (unknownOption != nullptr) warnUnknownOption(*state, unknownOption);
  if (insideGroup()) {
    // NCCL runs a group's calls at its end (lifecycle/group_calls.h): one of ours waits for
    // it; one for NCCL joins NCCL's group now. On a nonblocking communicator NCCL launches
    // the group later, from its own thread: ours could land before NCCL's on one rank and
    // after them on another, so such calls are NCCL's.
    if (state->nonblocking()) {
      state->counters().countForwarded(ForwardReason::NonblockingGroup);
      warnInvarianceEnds(state.get(), ForwardReason::NonblockingGroup, collective, count, type, op);
      return Route::Nccl;
    }
    const CallPlan plan = locked.engine()->plan(call);
    if (plan.ours) {
      deferToGroupEnd({state, call, type, op, copyOf(config)});
      return Route::Ours;
    }
    state->counters().countForwarded(plan.reason);
    warnInvarianceEnds(state.get(), plan.reason, collective, count, type, op);
    return Route::Nccl;
  }
  const SubmitResult result = submit(*state, locked, call);
  if (result.launched) return Route::Ours;
  warnInvarianceEnds(state.get(), result.reason, collective, count, type, op);
  return Route::Nccl;
}

// A call of ours that waited for its group's end, which has run: on the stream now, unless
// an abort from another thread took the communicator meanwhile (then nothing runs, as NCCL
// runs nothing on it). Route::Nccl: our side cannot take it after all; NCCL must.
Route launchDeferred(const DeferredCall& deferred) {
  CommState& state = *deferred.state;
  CommState::Locked locked = state.lock();
  // Checked under the lock: a destroy from another thread releases under it, and NCCL may
  // have freed the communicator since.
  if (state.gate().closed() || locked.phase() == CommPhase::Released) {
    CAR_WARN(state.device(), "{}: an {} of a group not run: the communicator was aborted, destroyed or "
             "finalized before the group ended", describe(state), collectiveName(deferred.call.collective));
    return Route::Refused;
  }
  if (!locked.takesDeferredCall()) return Route::Nccl;
  return submit(state, locked, deferred.call).launched ? Route::Ours : Route::Nccl;
}

// Waits until NCCL has launched the group that `state`'s communicator was in (its state leaves
// ncclInProgress), as a caller of a nonblocking group must before using the communicator.
// False when NCCL reports an error (the caller sees it from NCCL) or an abort took it.
bool groupLaunched(const RealNccl& real, CommState& state) {
  ncclResult_t async = ncclInProgress;
  ncclResult_t query = ncclSuccess;
  while (query == ncclSuccess && async == ncclInProgress) {
    if (!state.gate().pass([&] { query = real.commGetAsyncError(state.comm(), &async); })) return false;
    if (async == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (query == ncclSuccess && async == ncclSuccess) return true;
  CAR_INFO(state.device(), "{}: a call of ours in a group not run: NCCL reports the group failed", describe(state));
  return false;
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

// A hooked collective, whole: ours when routeCollective takes it, else the real NCCL's with
// the caller's arguments. `name` names the hook in our logs.
ncclResult_t hookCollective(const char* name, Collective collective, const void* send, void* recv,
                            std::size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream, const CollConfig* config = nullptr) {
  const RealNccl* real = realNccl();
  if (real == nullptr) return kNoRealNccl;
  std::shared_ptr<CommState> state;
  if (!passThrough()) {
    guarded(name, [&] {
      state = Registry::instance().find(comm);
      if (!state) warnInvarianceEnds(nullptr, ForwardReason::NotEligible, collective, count, type, op);
    });
  }
  const auto forward = [&] { return forwardToNccl(*real, collective, send, recv, count, type, op, comm, stream, config); };
  if (!state) return forward();
  // Held from our look at the communicator until NCCL's call returns: an abort, destroy or
  // finalize from another thread waits for it (at most kGateCloseSeconds), and never frees
  // the communicator in between.
  const NcclGate::Hold hold(state->gate());
  if (!hold.entered()) {
    guarded(name, [&] { refuse(*state, collective); });
    return ncclInvalidUsage;
  }
  Route route = Route::Nccl;
  bool setUpHere = false;
  guarded(name, [&] {
    setUpHere = setUpAtCall(*state, stream);
    route = routeCollective(*real, state, collective, send, recv, count, type, op, comm, stream, config);
  });
  if (route == Route::Ours) return ncclSuccess;
  if (setUpHere) {
    // A nonblocking communicator's set-up point: its exchange goes to NCCL with this call.
    bool issued = false;
    ncclResult_t answer = ncclSuccess;
    guarded(name, [&] {
      answer = setUpWithCall(*real, state, [&] {
        issued = true;
        return forward();
      });
    });
    if (issued) return answer;
  }
  return forward();
}

// A kept call our side could not launch at the group's end: NCCL's now, after the group.
ncclResult_t forwardAfterGroup(const RealNccl& real, const DeferredCall& deferred) {
  const CollectiveCall& call = deferred.call;
  return forwardToNccl(real, call.collective, call.send, call.recv, call.count, deferred.datatype, deferred.op,
                       deferred.state->comm(), call.stream, deferred.config.get());
}

// At the end of the thread's outermost group: the calls of ours it kept run when the group
// ran (ncclSuccess, or ncclInProgress with nonblocking members), and none when it failed or
// was only simulated. Returns the group's result, or the error of a call that NCCL had to
// take over from us and refused.
ncclResult_t endDeferredCalls(const RealNccl& real, ncclResult_t groupResult, bool simulated) {
  std::vector<DeferredCall> calls = takeDeferredCalls();
  // Not run in a fork()ed child on the communicators it inherited: our kernels and buffers
  // there are the parent's (lifecycle/registry.h).
  calls.erase(std::remove_if(calls.begin(), calls.end(),
                             [](const DeferredCall& deferred) { return !Registry::instance().holds(deferred.state); }),
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
    if (groupResult == ncclInProgress && !groupLaunched(real, *deferred.state)) continue;
    // As in hookCollective: no abort frees the communicator until NCCL has the call. A closed
    // gate is not entered; launchDeferred then says the call was not run.
    const NcclGate::Hold hold(deferred.state->gate());
    Route route = Route::Refused;  // should our side throw, nothing is sent to NCCL
    guarded("ncclGroupEnd", [&] { route = launchDeferred(deferred); });
    if (route != Route::Nccl) continue;
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
  std::shared_ptr<CommState> state;
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
  guarded("ncclGroupEnd", [&] { ended = endDeferredCalls(*real, result, false); });
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
  guarded("ncclGroupSimulateEnd", [&] { ended = endDeferredCalls(*real, result, true); });
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
