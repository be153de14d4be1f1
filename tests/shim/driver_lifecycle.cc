// Scenario "lifecycle": every way a communicator is born and dies, one all-reduce on each.
// Setup traffic is expected in: init, init.cfg, init.scal, initall, split, shrink (blocking,
// outside a group) and ar.c3, ar.c4.again (the first all-reduce of a nonblocking communicator
// that NCCL has finished creating). Not ar.c4: c4 is still being created then (the program
// did not wait for it, and NCCL refuses such a call). Not ar.c8: a nonblocking split's child
// is never ours.
#include <string>

#include "driver_common.h"

namespace driver {
namespace {

ncclComm_t split(const std::string& label, ncclComm_t parent, int color) {
  ncclComm_t comm = nullptr;
  step(label, standin::calls::split(parent, color, 7, &comm, nullptr),
       [&] { return ncclCommSplit(parent, color, 7, &comm, nullptr); });
  report(label, "made", standin::hex(comm));
  return comm;
}

}  // namespace

int runLifecycle() {
  const ncclUniqueId id = uniqueId("uid");
  const ncclUniqueId id2 = uniqueId("uid2");
  ncclComm_t c1 = initRank("init", id);

  ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
  blocking.blocking = 1;
  ncclComm_t c2 = initRankConfig("init.cfg", id, &blocking);

  ncclConfig_t nonblocking = NCCL_CONFIG_INITIALIZER;
  nonblocking.blocking = 0;
  ncclComm_t c3 = initRankConfig("init.nb", id, &nonblocking);
  pollUntilReady("nb.poll", c3);
  ncclComm_t c4 = initRankConfig("init.nb2", id2, &nonblocking);  // never polled by us

  ncclUniqueId ids[2] = {id, id2};
  ncclComm_t c5 = nullptr;
  step("init.scal", standin::calls::initRankScalable(&c5, 1, 0, 2, ids, nullptr),
       [&] { return ncclCommInitRankScalable(&c5, 1, 0, 2, ids, nullptr); });
  report("init.scal", "made", standin::hex(c5));

  ncclComm_t pair[2] = {nullptr, nullptr};
  const int devices[2] = {0, 1};
  step("initall", standin::calls::initAll(pair, 2, devices), [&] { return ncclCommInitAll(pair, 2, devices); });
  report("initall", "made", standin::hex(pair[0]) + "," + standin::hex(pair[1]));

  ncclComm_t c6 = split("split", c1, 0);
  split("split.nocolor", c1, NCCL_SPLIT_NOCOLOR);  // made=0x0: not part of any new communicator
  ncclComm_t c8 = split("split.nb", c3, 1);        // inherits nonblocking from c3

  ncclComm_t c9 = nullptr;
  step("shrink", standin::calls::shrink(c1, nullptr, 0, &c9, nullptr, NCCL_SHRINK_DEFAULT),
       [&] { return ncclCommShrink(c1, nullptr, 0, &c9, nullptr, NCCL_SHRINK_DEFAULT); });
  report("shrink", "made", standin::hex(c9));

  const struct {
    const char* name;
    ncclComm_t comm;
  } all[] = {{"c1", c1}, {"c2", c2}, {"c3", c3}, {"c4", c4}, {"c5", c5}, {"c6", c6},
             {"c8", c8}, {"c9", c9}, {"pair0", pair[0]}, {"pair1", pair[1]}};
  for (const auto& entry : all) {
    allReduce(std::string("ar.") + entry.name, gSend, gRecv, 1024, ncclFloat32, ncclSum, entry.comm);
  }
  // c4, created at last: its first call that NCCL takes is its set-up point.
  pollUntilReady("nb2.poll", c4);
  allReduce("ar.c4.again", gSend, gRecv, 1024, ncclFloat32, ncclSum, c4);

  // A revoked communicator is destroyed like any other (NCCL 2.28's recovery path).
  step("revoke.c6", standin::calls::revoke(c6, NCCL_REVOKE_DEFAULT), [&] { return ncclCommRevoke(c6, NCCL_REVOKE_DEFAULT); });

  // c1 is finalized first and destroyed last, so that the log shows which call released it.
  release("finalize.c1", "ncclCommFinalize", c1);
  release("abort.c2", "ncclCommAbort", c2);
  for (const auto& entry : all) {
    if (entry.comm == c1 || entry.comm == c2) continue;
    release(std::string("destroy.") + entry.name, "ncclCommDestroy", entry.comm);
  }
  release("destroy.c1", "ncclCommDestroy", c1);
  return 0;
}

}  // namespace driver
