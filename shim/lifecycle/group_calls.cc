#include "lifecycle/group_calls.h"

namespace car {
namespace {

// NCCL's groups are per thread; so is what waits for their end.
thread_local std::vector<DeferredCall> tDeferred;

}  // namespace

void deferToGroupEnd(DeferredCall call) { tDeferred.push_back(std::move(call)); }

std::vector<DeferredCall> takeDeferredCalls() {
  std::vector<DeferredCall> taken;
  taken.swap(tDeferred);
  return taken;
}

}  // namespace car
