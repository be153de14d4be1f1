// Calls of ours (all-reduce, all-gather, reduce-scatter) made inside ncclGroupStart/End. NCCL runs nothing of a group until its
// outermost ncclGroupEnd: a call only records the operation, work the caller puts on the
// stream before the end runs first, ncclGroupSimulateEnd runs nothing, and a group whose end
// fails runs nothing. Ours keep those semantics: the call is planned at once (ours or
// NCCL's, from what every rank shares), and a call that is ours waits here, in the thread's
// list, until the group's end decides whether it runs.
#pragma once

#include <nccl.h>

#include <memory>
#include <vector>

#include "exports/nccl_types.h"
#include "lifecycle/comm_state.h"
#include "rank_engine.h"

namespace car {

struct DeferredCall {
  std::shared_ptr<CommState> state;
  CollectiveCall call;
  // NCCL's own arguments, for NCCL should our side fail to launch the call at the end.
  ncclDataType_t datatype;
  ncclRedOp_t op;
  CollConfigCopy config;  // the per-call config, copied (the caller's may be gone by the end)
};

// Keeps a call of ours for this thread's group's end.
void deferToGroupEnd(DeferredCall call);

// The thread's kept calls, in the order they were made; the list is left empty. Called once
// the outermost group has ended (really, simulated or failed).
std::vector<DeferredCall> takeDeferredCalls();

}  // namespace car
