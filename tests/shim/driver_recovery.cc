// Scenario "stop-in-setup <ncclCommAbort|ncclCommDestroy|ncclCommFinalize>": a nonblocking
// communicator whose initialisation never ends (STANDIN_NCCL_ASYNC_POLLS is set huge by the
// test, as a peer that never comes would keep it), an all-reduce on it all the same (the
// library must not wait for the initialisation there, nor set anything up), and a watchdog
// thread ending the communicator 200 ms later. Both calls must return, and nothing may
// reach NCCL on the communicator after the watchdog's call.
#include <chrono>
#include <string>
#include <thread>

#include "driver_common.h"

namespace driver {

int runStopInSetup(const std::string& function) {
  const ncclUniqueId id = uniqueId("uid");
  ncclConfig_t nonblocking = NCCL_CONFIG_INITIALIZER;
  nonblocking.blocking = 0;
  ncclComm_t comm = initRankConfig("init", id, &nonblocking);
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    release("watchdog", function.c_str(), comm);
  });
  allReduce("ar", gSend, gRecv, 1024, ncclFloat32, ncclSum, comm);
  watchdog.join();
  return 0;
}

}  // namespace driver
