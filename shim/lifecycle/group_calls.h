// The hooked calls made inside ncclGroupStart/End. NCCL runs nothing of a group until its
// outermost ncclGroupEnd: a call only records the operation, work the caller puts on the
// stream before the end runs first, ncclGroupSimulateEnd runs nothing, and a group whose end
// fails runs nothing. Ours keep those semantics: the call is decided at once (ours or NCCL's,
// from what every rank shares), and a call that is ours waits here, in the thread's list,
// with its plan, until the group's end decides whether it runs. Every call's decision is
// remembered too: a group NCCL refuses never entered any communicator's sequence, so its
// calls give back their places and their counts.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "exports/nccl_types.h"
#include "launcher.h"
#include "lifecycle/communicator.h"

namespace car {

struct DeferredCall {
  std::shared_ptr<Communicator> comm;
  CollectiveCall call;
  CallPlan plan;
  // NCCL's own arguments, for NCCL should our side not launch the call at the end.
  ncclDataType_t datatype;
  ncclRedOp_t op;
  CollConfigCopy config;  // the per-call config, copied (the caller's may be gone by the end)
};

// A hooked call decided inside the thread's group, as its communicator decided it.
struct GroupCall {
  std::shared_ptr<Communicator> comm;
  Decision decision;
};

// Keeps a call of ours for this thread's group's end.
void deferToGroupEnd(DeferredCall call);
// A hooked call inside the thread's group, once decided.
void noteGroupCall(const std::shared_ptr<Communicator>& comm, const Decision& decision);

// What the thread's outermost group left: its kept calls and all its decided calls, in the
// order they were made. The lists are left empty. Called once the outermost group has ended
// (really, simulated or failed).
struct GroupCalls {
  std::vector<DeferredCall> deferred;
  std::vector<GroupCall> decided;
};
GroupCalls takeGroupCalls();

}  // namespace car
