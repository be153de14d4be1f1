// Scenarios where a program goes around the library, or around the moment it looks:
//  "fork": a fork()ed child makes an all-reduce on, and destroys, the communicator it
//    inherited; the parent goes on with it after the child has exited.
//  "fork-in-group": the process forks inside a group that created a communicator; the child
//    ends the group, then the parent.
//  "address-reuse pnccl|handle": a communicator ended where the library never sees it end
//    (through NCCL's pncclCommDestroy, or on a handle to the real NCCL), then a new one that
//    NCCL gives the same address (the test sets STANDIN_NCCL_REUSE_ADDRESSES=1).
//  "plain": a communicator made, one all-reduce, destroyed (the test preloads a profiler too).
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

int runForkInGroup() {
  const ncclUniqueId id = uniqueId("uid");
  groupStart("group.start");
  ncclComm_t comm = initRank("init", id);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    groupEnd("child.group.end");
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 1;
  report("child", "status", std::to_string(status));
  groupEnd("group.end");
  allReduce("ar", gSend, gRecv, 1024, ncclFloat32, ncclSum, comm);
  release("destroy", "ncclCommDestroy", comm);
  return 0;
}

int runAddressReuse(const std::string& how) {
  const ncclUniqueId id = uniqueId("uid");
  ncclComm_t first = initRank("init.1", id);
  allReduce("ar.1", gSend, gRecv, 1024, ncclFloat32, ncclSum, first);
  // NCCL's profiling name reaches NCCL itself (the library exports none); so does the
  // function looked up on a handle to the NCCL the program loaded.
  auto destroy = &pncclCommDestroy;
  if (how == "handle") {
    void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    destroy = nccl != nullptr ? reinterpret_cast<decltype(&ncclCommDestroy)>(dlsym(nccl, "ncclCommDestroy")) : nullptr;
  }
  if (destroy == nullptr) return 1;
  step("destroy.unseen", standin::calls::onComm("ncclCommDestroy", first), [&] { return destroy(first); });
  ncclComm_t second = initRank("init.2", id);
  allReduce("ar.2", gSend, gRecv, 1024, ncclFloat32, ncclSum, second);
  allReduce("ar.3", gSend, gRecv, 1024, ncclFloat32, ncclSum, second);
  release("destroy.2", "ncclCommDestroy", second);
  return 0;
}

int runPlain() {
  const ncclUniqueId id = uniqueId("uid");
  ncclComm_t comm = initRank("init", id);
  allReduce("ar", gSend, gRecv, 1024, ncclFloat32, ncclSum, comm);
  release("destroy", "ncclCommDestroy", comm);
  return 0;
}

int runAbortInForward() {
  const ncclUniqueId id = uniqueId("uid");
  ncclComm_t comm = initRank("init", id);
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the all-reduce is inside NCCL by then
    release("watchdog", "ncclCommAbort", comm);
  });
  allReduce("ar", gSend, gRecv, 1024, ncclFloat32, ncclSum, comm);
  watchdog.join();
  return 0;
}

}  // namespace driver
