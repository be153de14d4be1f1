#include "lifecycle/group_calls.h"

namespace car {
namespace {

// NCCL's groups are per thread; so is what waits for their end.
thread_local std::vector<DeferredAllReduce> tDeferred;

}  // namespace

void deferToGroupEnd(DeferredAllReduce call) { tDeferred.push_back(std::move(call)); }

std::vector<DeferredAllReduce> takeDeferredAllReduces() {
  std::vector<DeferredAllReduce> taken;
  taken.swap(tDeferred);
  return taken;
}

}  // namespace car
