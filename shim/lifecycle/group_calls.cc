#include "lifecycle/group_calls.h"

#include <algorithm>
#include <utility>

namespace car {
namespace {

// NCCL's groups are per thread; so is what waits for their end.
thread_local GroupCalls tGroup;

}  // namespace

void deferToGroupEnd(DeferredCall call) { tGroup.deferred.push_back(std::move(call)); }

void noteGroupCall(const std::shared_ptr<Communicator>& comm, std::uint64_t index) {
  const bool marked = std::any_of(tGroup.marks.begin(), tGroup.marks.end(),
                                  [&](const GroupMark& mark) { return mark.comm == comm; });
  if (!marked) tGroup.marks.push_back(GroupMark{comm, index});
}

GroupCalls takeGroupCalls() { return std::exchange(tGroup, GroupCalls{}); }

}  // namespace car
