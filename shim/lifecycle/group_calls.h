// The hooked calls made inside ncclGroupStart/End. NCCL runs nothing of a group until its
// outermost ncclGroupEnd: a call only records the operation, work the caller puts on the
// stream before the end runs first, ncclGroupSimulateEnd runs nothing, and a group whose end
// fails runs nothing. Ours keep those semantics: the call is decided at once (ours or NCCL's,
// from what every rank shares), and a call that is ours waits here, in the thread's list,
// with its plan, until the group's end decides whether it runs. Each communicator's first
// call in the group is remembered too: a group NCCL refuses never entered any communicator's
// sequence, so its calls' places are given back.
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

// Where a communicator's calls in the thread's group began.
struct GroupMark {
  std::shared_ptr<Communicator> comm;
  std::uint64_t firstIndex = 0;
};

// Keeps a call of ours for this thread's group's end.
void deferToGroupEnd(DeferredCall call);
// A hooked call at `index` on `comm` inside the thread's group (the first one per communicator counts).
void noteGroupCall(const std::shared_ptr<Communicator>& comm, std::uint64_t index);

// What the thread's outermost group left: its kept calls, in the order they were made, and
// its marks. The lists are left empty. Called once the outermost group has ended (really,
// simulated or failed).
struct GroupCalls {
  std::vector<DeferredCall> deferred;
  std::vector<GroupMark> marks;
};
GroupCalls takeGroupCalls();

}  // namespace car
