// Scenarios where a program goes around the library, or around the moment it looks:
//  "fork": a fork()ed child makes an all-reduce on, and destroys, the communicator it
//    inherited; the parent goes on with it after the child has exited.
//  "profiling-names": a communicator made, used and ended through NCCL's pnccl* names.
//  "address-reuse": a communicator ended on a handle to the real NCCL (so the library never
//    sees it end), then a new one that NCCL gives the same address (the test sets
//    STANDIN_NCCL_REUSE_ADDRESSES=1).
//  "abort-in-forward": an all-reduce on its way to NCCL (the test makes NCCL slow to take it,
//    STANDIN_NCCL_DELAY_MS_ncclAllReduce) while a watchdog thread aborts the communicator.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "driver_common.h"

namespace driver {

int runFork() {
  const ncclUniqueId id = uniqueId("uid");
  ncclComm_t comm = initRank("init", id);
  allReduce("ar.parent", gSend, gRecv, 1024, ncclFloat32, ncclSum, comm);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    allReduce("child.ar", gSend, gRecv, 1024, ncclFloat32, ncclSum, comm);
    release("child.destroy", "ncclCommDestroy", comm);
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 1;
  report("child", "status", std::to_string(status));
  allReduce("ar.after", gSend, gRecv, 1024, ncclFloat32, ncclSum, comm);
  release("destroy", "ncclCommDestroy", comm);
  return 0;
}

int runProfilingNames() {
  const ncclUniqueId id = uniqueId("uid");
  ncclComm_t comm = nullptr;
  step("init", standin::calls::initRank(&comm, 1, id, 0), [&] { return pncclCommInitRank(&comm, 1, id, 0); });
  report("init", "made", standin::hex(comm));
  step("ar", standin::calls::allReduce(gSend, gRecv, 1024, ncclFloat32, ncclSum, comm, fakeStream()),
       [&] { return pncclAllReduce(gSend, gRecv, 1024, ncclFloat32, ncclSum, comm, fakeStream()); });
  step("destroy", standin::calls::onComm("ncclCommDestroy", comm), [&] { return pncclCommDestroy(comm); });
  return 0;
}

int runAddressReuse() {
  const ncclUniqueId id = uniqueId("uid");
  ncclComm_t first = initRank("init.1", id);
  allReduce("ar.1", gSend, gRecv, 1024, ncclFloat32, ncclSum, first);
  // The real NCCL itself, as the program loaded it: its own function, not the library's.
  void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  auto* destroy = nccl != nullptr ? reinterpret_cast<decltype(&ncclCommDestroy)>(dlsym(nccl, "ncclCommDestroy")) : nullptr;
  if (destroy == nullptr) return 1;
  step("destroy.unseen", standin::calls::onComm("ncclCommDestroy", first), [&] { return destroy(first); });
  ncclComm_t second = initRank("init.2", id);
  allReduce("ar.2", gSend, gRecv, 1024, ncclFloat32, ncclSum, second);
  allReduce("ar.3", gSend, gRecv, 1024, ncclFloat32, ncclSum, second);
  release("destroy.2", "ncclCommDestroy", second);
  return 0;
}

int runAbortInForward() {
  const ncclUniqueId id = uniqueId("uid");
  ncclComm_t comm = initRank("init", id);
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    release("watchdog", "ncclCommAbort", comm);
  });
  allReduce("ar", gSend, gRecv, 1024, ncclFloat32, ncclSum, comm);
  watchdog.join();
  return 0;
}

}  // namespace driver
