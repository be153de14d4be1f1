// Scenario "never-destroyed [_exit]": two communicators; one destroyed, the other left alive
// with three all-reduces on it, as JAX leaves its own, when the program returns from main
// (or ends with _exit, which runs no exit handler).
#include <unistd.h>

#include <cstdio>

#include "driver_common.h"

namespace driver {

int runNeverDestroyed(bool quickExit) {
  ncclComm_t destroyed = initRank("init", uniqueId("uid"));
  allReduce("ar", gSend, gRecv, 1024, ncclFloat32, ncclSum, destroyed);
  release("destroy", "ncclCommDestroy", destroyed);
  ncclComm_t alive = initRank("alive", uniqueId("uid2"));
  for (const char* label : {"ar.1", "ar.2", "ar.3"}) allReduce(label, gSend, gRecv, 256, ncclBfloat16, ncclSum, alive);
  if (quickExit) {
    std::fflush(stdout);
    _exit(0);
  }
  return 0;
}

}  // namespace driver
