// A program that loads NCCL itself, as JAX/XLA, TensorFlow, XGBoost and ctypes bindings do:
// it links no libnccl, dlopens one and takes every function from that handle.
//   shim_handle_driver LIB                 a life-cycle through the handle
//   shim_handle_driver LIB then LIB2       the same, then dlopen(LIB2) and one more
//                                          communicator through that handle
//   shim_handle_driver LIB forwarded NAME...  call each NAME generically (driver_forwarded.cc)
//   shim_handle_driver LIB device-api      a communicator, then two functions nccl.h lacks
//                                          (standin_device_api.h) through the handle
// LIB is a name (libnccl.so.2) or a path. Prints one "<label> result=<rc>" line per call,
// like shim_driver; "<name> missing" and exit 3 for a function the handle lacks.
#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <vector>

#include "driver_steps.h"
#include "standin_device_api.h"

namespace driver {
int runForwarded(void* source, ncclComm_t comm, const std::vector<std::string>& names);
}  // namespace driver

namespace {

#define CAR_LIFECYCLE_FUNCTIONS(X)                                                                   \
  X(ncclCommInitRank) X(ncclCommInitRankConfig) X(ncclCommInitAll) X(ncclCommSplit) X(ncclGroupStart) \
  X(ncclAllReduce) X(ncclGroupEnd) X(ncclCommDestroy)

// The functions of one handle that the life-cycle uses.
struct Nccl {
#define CAR_FIELD(name) decltype(&::name) name = nullptr;
  CAR_LIFECYCLE_FUNCTIONS(CAR_FIELD)
#undef CAR_FIELD
};

// Says each one missing unless `quiet` (the "forwarded" scenario needs only two of them).
bool lookUp(void* handle, Nccl* nccl, bool quiet = false) {
  bool complete = true;
#define CAR_LOOK_UP(name)                                                  \
  nccl->name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));  \
  if (nccl->name == nullptr) {                                             \
    if (!quiet) std::printf("%s missing\n", #name);                        \
    complete = false;                                                      \
  }
  CAR_LIFECYCLE_FUNCTIONS(CAR_LOOK_UP)
#undef CAR_LOOK_UP
  return complete;
}

using driver::step;
namespace calls = standin::calls;

alignas(256) char gBuffer[2][4096];

ncclComm_t initOne(const Nccl& nccl, const std::string& label) {
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  step(label, calls::initRank(&comm, 1, id, 0), [&] { return nccl.ncclCommInitRank(&comm, 1, id, 0); });
  return comm;
}

void destroy(const Nccl& nccl, const std::string& label, ncclComm_t comm) {
  step(label, calls::onComm("ncclCommDestroy", comm), [&] { return nccl.ncclCommDestroy(comm); });
}

// Communicators born four ways, an all-reduce in a group, all released.
void runLifecycle(const Nccl& nccl) {
  ncclUniqueId id{};
  ncclComm_t config = nullptr, split = nullptr;
  ncclComm_t pair[2] = {nullptr, nullptr};
  ncclConfig_t settings = NCCL_CONFIG_INITIALIZER;
  settings.blocking = 1;
  ncclComm_t comm = initOne(nccl, "init");
  step("init.cfg", calls::initRankConfig(&config, 1, id, 0, &settings),
       [&] { return nccl.ncclCommInitRankConfig(&config, 1, id, 0, &settings); });
  step("initall", calls::initAll(pair, 2, nullptr), [&] { return nccl.ncclCommInitAll(pair, 2, nullptr); });
  step("split", calls::split(comm, 0, 0, &split, nullptr),
       [&] { return nccl.ncclCommSplit(comm, 0, 0, &split, nullptr); });
  step("g.start", calls::groupStart(), [&] { return nccl.ncclGroupStart(); });
  step("ar", calls::allReduce(gBuffer[0], gBuffer[1], 1024, ncclFloat32, ncclSum, comm, nullptr),
       [&] { return nccl.ncclAllReduce(gBuffer[0], gBuffer[1], 1024, ncclFloat32, ncclSum, comm, nullptr); });
  step("g.end", calls::groupEnd(), [&] { return nccl.ncclGroupEnd(); });
  int n = 0;
  for (ncclComm_t made : {comm, config, split, pair[0], pair[1]}) destroy(nccl, "destroy." + std::to_string(n++), made);
}

// Two functions nccl.h lacks, looked up on the handle as a device-API user would.
int runDeviceApi(void* handle, const Nccl& nccl) {
  auto* create = reinterpret_cast<decltype(&::ncclDevCommCreate)>(dlsym(handle, "ncclDevCommCreate"));
  auto* destroyDev = reinterpret_cast<decltype(&::ncclDevCommDestroy)>(dlsym(handle, "ncclDevCommDestroy"));
  if (create == nullptr || destroyDev == nullptr) {
    std::printf("ncclDevCommCreate or ncclDevCommDestroy missing\n");
    return 3;
  }
  ncclComm_t comm = initOne(nccl, "init");
  driver::report("init", "made", standin::hex(comm));
  alignas(64) static char devComm[64];
  const standin::CallLine created =
      standin::CallLine("ncclDevCommCreate").ptr("comm", comm).ptr("reqs", gBuffer[0]).ptr("devcomm", devComm);
  step("devcreate", created, [&] { return create(comm, gBuffer[0], devComm); });
  step("ar", calls::allReduce(gBuffer[0], gBuffer[1], 1024, ncclFloat32, ncclSum, comm, nullptr),
       [&] { return nccl.ncclAllReduce(gBuffer[0], gBuffer[1], 1024, ncclFloat32, ncclSum, comm, nullptr); });
  step("devdestroy", standin::CallLine("ncclDevCommDestroy").ptr("comm", comm).ptr("devcomm", devComm),
       [&] { return destroyDev(comm, devComm); });
  destroy(nccl, "destroy", comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::fprintf(stderr, "usage: shim_handle_driver LIB [then LIB2 | forwarded NAME... | device-api]\n");
    return 2;
  }
  const std::vector<std::string> rest(argv + 2, argv + argc);
  void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::printf("cannot load %s\n", argv[1]);
    return 4;
  }
  Nccl nccl;
  const bool forwarded = !rest.empty() && rest[0] == "forwarded";
  const bool complete = lookUp(handle, &nccl, forwarded);
  if (forwarded ? nccl.ncclCommInitRank == nullptr || nccl.ncclCommDestroy == nullptr : !complete) return 3;

  if (!rest.empty() && rest[0] == "device-api") {
    const int status = runDeviceApi(handle, nccl);
    if (status != 0) return status;
  } else if (forwarded) {
    ncclComm_t comm = initOne(nccl, "init");
    const int status = driver::runForwarded(handle, comm, std::vector<std::string>(rest.begin() + 1, rest.end()));
    if (status != 0) return status;
    destroy(nccl, "destroy", comm);
  } else {
    runLifecycle(nccl);
  }

  if (rest.size() == 2 && rest[0] == "then") {
    void* second = dlopen(rest[1].c_str(), RTLD_NOW | RTLD_LOCAL);
    Nccl again;
    if (second == nullptr || !lookUp(second, &again)) return 5;
    // The same library both times, or another one (the real NCCL, bypassing us).
    driver::report("then", "same", nccl.ncclCommInitRank == again.ncclCommInitRank ? "1" : "0");
    destroy(again, "then.destroy", initOne(again, "then.init"));
  }
  std::printf("done\n");
  return 0;
}
