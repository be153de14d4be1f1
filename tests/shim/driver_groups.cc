// Scenario "groups": communicators created and all-reduced inside ncclGroupStart/End.
// Setup traffic is expected only after the caller's outer ncclGroupEnd: g1.end, g2.end,
// g4.end and g5.end (a split whose child NCCL hands out only at the group's end); and in
// g3.after.e, the first all-reduce outside a group of a nonblocking communicator first
// all-reduced inside g3.
#include <string>

#include "driver_common.h"

namespace driver {

int runGroups() {
  const ncclUniqueId id = uniqueId("uid");

  // nccl-tests style: all communicators of the process from one thread in one group.
  groupStart("g1.start");
  ncclComm_t a = initRank("g1.init.a", id);
  ncclComm_t b = initRank("g1.init.b", id);
  groupEnd("g1.end");

  // Nested groups: only the outer end counts.
  groupStart("g2.start");
  groupStart("g2.start.inner");
  ncclComm_t c = initRank("g2.init.c", id);
  groupEnd("g2.end.inner");
  groupEnd("g2.end");

  // A nonblocking communicator whose first all-reduce is inside a group: forwarded there
  // (not ready), set up at the group's end.
  ncclConfig_t nonblocking = NCCL_CONFIG_INITIALIZER;
  nonblocking.blocking = 0;
  ncclComm_t e = initRankConfig("g3.init.e", id, &nonblocking);
  groupStart("g3.start");
  allReduce("g3.ar.a", gSend, gRecv, 256, ncclBfloat16, ncclSum, a);
  allReduce("g3.ar.e", gSend, gRecv, 256, ncclBfloat16, ncclSum, e);
  groupEnd("g3.end");
  pollUntilReady("g3.poll.e", e);
  allReduce("g3.after.e", gSend, gRecv, 256, ncclBfloat16, ncclSum, e);

  // A blocking communicator created and all-reduced in the same group.
  groupStart("g4.start");
  ncclComm_t d = initRank("g4.init.d", id);
  allReduce("g4.ar.d", gSend, gRecv, 64, ncclFloat16, ncclSum, d);
  groupEnd("g4.end");

  // A split inside a group: NCCL writes the child into newcomm only at the group's end (NULL
  // until then), so it is adopted there and set up right after that end.
  ncclComm_t f = nullptr;
  groupStart("g5.start");
  step("g5.split.f", standin::calls::split(b, 0, 7, &f, nullptr), [&] { return ncclCommSplit(b, 0, 7, &f, nullptr); });
  report("g5.split.f", "made", standin::hex(f));
  groupEnd("g5.end");
  report("g5.end", "filled", standin::hex(f));
  allReduce("g5.ar.f", gSend, gRecv, 64, ncclFloat32, ncclSum, f);

  release("destroy.a", "ncclCommDestroy", a);
  release("destroy.b", "ncclCommDestroy", b);
  release("destroy.c", "ncclCommDestroy", c);
  release("destroy.d", "ncclCommDestroy", d);
  release("destroy.e", "ncclCommDestroy", e);
  release("destroy.f", "ncclCommDestroy", f);
  return 0;
}


// Scenario "simulate": groups ended by ncclGroupSimulateEnd, which NCCL counts as a group
// end. Setup traffic is expected only in "s2.init" (a blocking init after the simulated
// group, outside any group) and "s4.ar" (a nonblocking communicator's first all-reduce
// outside a group, after one inside a simulated group).
int runGroupSimulate() {
  const ncclUniqueId id = uniqueId("uid");
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;

  groupStart("s1.start");
  ncclComm_t created = initRank("s1.init", id);
  step("s1.sim", standin::calls::groupSimulateEnd(&info), [&] { return ncclGroupSimulateEnd(&info); });
  report("s1.sim", "estimate", std::to_string(info.estimatedTime));

  ncclComm_t after = initRank("s2.init", id);
  allReduce("s2.ar", gSend, gRecv, 256, ncclFloat32, ncclSum, after);
  allReduce("s1.ar", gSend, gRecv, 256, ncclFloat32, ncclSum, created);

  ncclConfig_t nonblocking = NCCL_CONFIG_INITIALIZER;
  nonblocking.blocking = 0;
  ncclComm_t lazy = initRankConfig("s3.init", id, &nonblocking);
  groupStart("s3.start");
  allReduce("s3.ar", gSend, gRecv, 256, ncclFloat32, ncclSum, lazy);
  step("s3.sim", standin::calls::groupSimulateEnd(&info), [&] { return ncclGroupSimulateEnd(&info); });
  pollUntilReady("s3.poll", lazy);
  allReduce("s4.ar", gSend, gRecv, 256, ncclFloat32, ncclSum, lazy);

  release("destroy.created", "ncclCommDestroy", created);
  release("destroy.after", "ncclCommDestroy", after);
  release("destroy.lazy", "ncclCommDestroy", lazy);
  return 0;
}

}  // namespace driver
