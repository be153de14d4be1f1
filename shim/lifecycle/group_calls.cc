#include "lifecycle/group_calls.h"

#include <utility>

namespace car {
namespace {

// NCCL's groups are per thread; so is what waits for their end.
thread_local GroupCalls tGroup;

}  // namespace

void deferToGroupEnd(DeferredCall call) { tGroup.deferred.push_back(std::move(call)); }

void noteGroupCall(const std::shared_ptr<Communicator>& comm, const Decision& decision) {
  tGroup.decided.push_back(GroupCall{comm, decision});
}

GroupCalls takeGroupCalls() { return std::exchange(tGroup, GroupCalls{}); }

}  // namespace car
