// Scenario "newer-api": the functions of NCCL 2.29 to 2.32 that the library hooks (the per-call
// config forms of the all-reduce, the all-gather and the reduce-scatter among them), over a
// stand-in of that NCCL. Setup traffic is expected in: init, grow, grow.join (a grown
// communicator whose config says blocking = 1 is set up like a split's child, on the ranks
// already in and on the joining ones); not grow.default (no config: the ranks could disagree
// on its mode) nor grow.nb (nonblocking). suspend.c1 releases our side of c1 before NCCL's
// call; c1's later calls are NCCL's alone.
#include <string>

#include "driver_common.h"
#include "generic_call.h"

namespace driver {

int runNewerApi() {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
  const ncclUniqueId id = uniqueId("uid");
  ncclComm_t c1 = initRank("init", id);
  ncclUniqueId growId = uniqueId("uid.grow");
  ncclConfig_t nonblocking = NCCL_CONFIG_INITIALIZER;
  nonblocking.blocking = 0;
  ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
  blocking.blocking = 1;
  struct Grown {
    const char* label;
    ncclComm_t parent;
    const ncclUniqueId* id;
    int rank;
    ncclConfig_t* config;
    ncclComm_t made = nullptr;
  } grown[] = {{"grow", c1, &growId, -1, &blocking},  // the root of those already in
               {"grow.join", nullptr, &growId, 1, &blocking},
               {"grow.default", c1, nullptr, -1, nullptr},
               {"grow.nb", c1, nullptr, -1, &nonblocking}};
  for (Grown& g : grown) {
    step(g.label, standin::calls::grow(g.parent, 2, g.id, g.rank, &g.made, g.config),
         [&] { return ncclCommGrow(g.parent, 2, g.id, g.rank, &g.made, g.config); });
    report(g.label, "made", standin::hex(g.made));
  }

  // ncclAllReduceConfig on a communicator that is not ours: NCCL gets it, config and all.
  ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
  config.maxCTAs = 3;
  step("arc.c1", standin::calls::allReduceConfig(gSend, gRecv, 1024, ncclFloat32, ncclSum, c1, fakeStream(), &config),
       [&] { return ncclAllReduceConfig(gSend, gRecv, 1024, ncclFloat32, ncclSum, c1, fakeStream(), &config); });
  // The all-gather's and the reduce-scatter's config forms, likewise: NCCL gets the call as made.
  step("agc.c1", standin::genericCall("ncclAllGatherConfig", gSend, gRecv, std::size_t{256}, ncclFloat32, c1,
                                      fakeStream(), &config),
       [&] { return ncclAllGatherConfig(gSend, gRecv, 256, ncclFloat32, c1, fakeStream(), &config); });
  step("rsc.c1", standin::genericCall("ncclReduceScatterConfig", gSend, gRecv, std::size_t{256}, ncclFloat32, ncclMax,
                                      c1, fakeStream(), &config),
       [&] { return ncclReduceScatterConfig(gSend, gRecv, 256, ncclFloat32, ncclMax, c1, fakeStream(), &config); });
  for (const Grown& g : grown) allReduce(std::string("ar.") + g.label, gSend, gRecv, 1024, ncclFloat32, ncclSum, g.made);

  step("suspend.c1", standin::calls::suspend(c1, NCCL_SUSPEND_MEM), [&] { return ncclCommSuspend(c1, NCCL_SUSPEND_MEM); });
  allReduce("ar.c1.suspended", gSend, gRecv, 1024, ncclFloat32, ncclSum, c1);
  step("resume.c1", standin::genericCall("ncclCommResume", c1), [&] { return ncclCommResume(c1); });
  allReduce("ar.c1.resumed", gSend, gRecv, 1024, ncclFloat32, ncclSum, c1);

  for (const Grown& g : grown) release(std::string("destroy.") + g.label, "ncclCommDestroy", g.made);
  release("destroy.c1", "ncclCommDestroy", c1);
#endif
  return 0;
}

}  // namespace driver
