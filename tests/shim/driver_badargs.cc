// Scenario "badargs": the caller's own mistakes. NCCL (the stand-in) rejects each one; the
// shim must forward them untouched and return NCCL's error, without crashing or setting up.
#include <string>

#include "driver_common.h"

namespace driver {

int runBadArguments() {
  const ncclUniqueId id = uniqueId("uid");
  ncclComm_t comm = nullptr;
  ncclComm_t comms[2] = {nullptr, nullptr};
  step("init.nullcomm", standin::calls::initRank(nullptr, 1, id, 0), [&] { return ncclCommInitRank(nullptr, 1, id, 0); });
  step("init.nranks0", standin::calls::initRank(&comm, 0, id, 0), [&] { return ncclCommInitRank(&comm, 0, id, 0); });
  step("init.rank5", standin::calls::initRank(&comm, 1, id, 5), [&] { return ncclCommInitRank(&comm, 1, id, 5); });
  step("initcfg.nullcomm", standin::calls::initRankConfig(nullptr, 1, id, 0, nullptr),
       [&] { return ncclCommInitRankConfig(nullptr, 1, id, 0, nullptr); });
  step("scal.noids", standin::calls::initRankScalable(&comm, 1, 0, 0, nullptr, nullptr),
       [&] { return ncclCommInitRankScalable(&comm, 1, 0, 0, nullptr, nullptr); });
  step("initall.null", standin::calls::initAll(nullptr, 2, nullptr), [&] { return ncclCommInitAll(nullptr, 2, nullptr); });
  step("initall.ndev0", standin::calls::initAll(comms, 0, nullptr), [&] { return ncclCommInitAll(comms, 0, nullptr); });
  step("split.nullparent", standin::calls::split(nullptr, 0, 0, &comm, nullptr),
       [&] { return ncclCommSplit(nullptr, 0, 0, &comm, nullptr); });
  step("shrink.nullparent", standin::calls::shrink(nullptr, nullptr, 0, &comm, nullptr, 0),
       [&] { return ncclCommShrink(nullptr, nullptr, 0, &comm, nullptr, 0); });
  allReduce("ar.nullcomm", gSend, gRecv, 1024, ncclFloat32, ncclSum, nullptr);
  release("destroy.null", "ncclCommDestroy", nullptr);
  release("abort.null", "ncclCommAbort", nullptr);
  release("finalize.null", "ncclCommFinalize", nullptr);
  groupEnd("groupend.unopened");
  return 0;
}

}  // namespace driver
