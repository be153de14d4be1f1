// A program that does not link libnccl. It finds the NCCL functions either through
// dlsym(RTLD_DEFAULT), i.e. in the preloaded libnccl-car.so, or, like JAX, TensorFlow and
// ctypes bindings, through dlsym on a handle of its own:
//   shim_nolib_driver [--load LIB | --open LIB [--then LIB2]] [forwarded NAME...]
//   --load LIB    first loads LIB privately (RTLD_LOCAL), as PyTorch does with its own copy:
//                 its functions are then not in the global scope;
//   --open LIB    dlopen(LIB) (a name or a path) and take every function from that handle;
//   --then LIB2   afterwards dlopen(LIB2) too and run a short life-cycle through it;
//   forwarded     instead of the hook sequence, call each NAME generically (driver_forwarded.cc).
// Prints "<name> missing" for each function it cannot find, else one "<label> result=<rc>"
// line per call, like shim_driver.
#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <vector>

#include "driver_steps.h"

namespace driver {
int runForwarded(void* source, ncclComm_t comm, const std::vector<std::string>& names);
}  // namespace driver

namespace {

#define CAR_HOOKS(X)                                                                                        \
  X(ncclAllReduce) X(ncclCommInitRank) X(ncclCommInitRankConfig) X(ncclCommInitRankScalable) X(ncclCommInitAll) \
  X(ncclCommSplit) X(ncclCommShrink) X(ncclCommDestroy) X(ncclCommAbort) X(ncclCommFinalize) X(ncclGroupStart)  \
  X(ncclGroupEnd)

// The hooked functions as one library gives them.
struct Hooks {
#define CAR_HOOK_FIELD(name) decltype(&::name) name = nullptr;
  CAR_HOOKS(CAR_HOOK_FIELD)
#undef CAR_HOOK_FIELD
};

bool findHooks(void* source, Hooks* hooks) {
  bool complete = true;
#define CAR_FIND_HOOK(name)                                                 \
  hooks->name = reinterpret_cast<decltype(&::name)>(dlsym(source, #name));  \
  if (hooks->name == nullptr) {                                             \
    std::printf("%s missing\n", #name);                                     \
    complete = false;                                                       \
  }
  CAR_HOOKS(CAR_FIND_HOOK)
#undef CAR_FIND_HOOK
  return complete;
}

using driver::step;
namespace calls = standin::calls;

alignas(256) char gBuffer[2][4096];

// Every hooked way to create and end a communicator, and an all-reduce in a group.
void runHooks(const Hooks& nccl) {
  ncclUniqueId id{};
  ncclComm_t c1 = nullptr, c2 = nullptr, c3 = nullptr, c4 = nullptr, c5 = nullptr;
  ncclComm_t pair[2] = {nullptr, nullptr};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  step("init", calls::initRank(&c1, 1, id, 0), [&] { return nccl.ncclCommInitRank(&c1, 1, id, 0); });
  step("init.cfg", calls::initRankConfig(&c2, 1, id, 0, &config),
       [&] { return nccl.ncclCommInitRankConfig(&c2, 1, id, 0, &config); });
  step("init.scal", calls::initRankScalable(&c3, 1, 0, 1, &id, &config),
       [&] { return nccl.ncclCommInitRankScalable(&c3, 1, 0, 1, &id, &config); });
  step("initall", calls::initAll(pair, 2, nullptr), [&] { return nccl.ncclCommInitAll(pair, 2, nullptr); });
  step("split", calls::split(c1, 0, 0, &c4, nullptr), [&] { return nccl.ncclCommSplit(c1, 0, 0, &c4, nullptr); });
  step("shrink", calls::shrink(c1, nullptr, 0, &c5, nullptr, 0),
       [&] { return nccl.ncclCommShrink(c1, nullptr, 0, &c5, nullptr, 0); });
  step("g.start", calls::groupStart(), [&] { return nccl.ncclGroupStart(); });
  step("ar", calls::allReduce(gBuffer[0], gBuffer[1], 1024, ncclFloat32, ncclSum, c1, nullptr),
       [&] { return nccl.ncclAllReduce(gBuffer[0], gBuffer[1], 1024, ncclFloat32, ncclSum, c1, nullptr); });
  step("g.end", calls::groupEnd(), [&] { return nccl.ncclGroupEnd(); });
  step("finalize", calls::onComm("ncclCommFinalize", c1), [&] { return nccl.ncclCommFinalize(c1); });
  step("destroy", calls::onComm("ncclCommDestroy", c1), [&] { return nccl.ncclCommDestroy(c1); });
  step("abort", calls::onComm("ncclCommAbort", c2), [&] { return nccl.ncclCommAbort(c2); });
  int n = 0;
  for (ncclComm_t comm : {c3, c4, c5, pair[0], pair[1]}) {
    step("destroy." + std::to_string(n++), calls::onComm("ncclCommDestroy", comm),
         [&] { return nccl.ncclCommDestroy(comm); });
  }
}

// A communicator made and released through `nccl`, labels prefixed.
ncclComm_t initOne(const Hooks& nccl, const std::string& label) {
  ncclUniqueId id{};
  ncclComm_t comm = nullptr;
  step(label, calls::initRank(&comm, 1, id, 0), [&] { return nccl.ncclCommInitRank(&comm, 1, id, 0); });
  return comm;
}

void destroyOne(const Hooks& nccl, const std::string& label, ncclComm_t comm) {
  step(label, calls::onComm("ncclCommDestroy", comm), [&] { return nccl.ncclCommDestroy(comm); });
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<std::string> args(argv + 1, argv + argc);
  void* source = RTLD_DEFAULT;
  std::string then;
  while (args.size() >= 2 && (args[0] == "--load" || args[0] == "--open" || args[0] == "--then")) {
    if (args[0] == "--then") {
      then = args[1];
    } else {
      void* handle = dlopen(args[1].c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        std::printf("cannot load %s\n", args[1].c_str());
        return 4;
      }
      if (args[0] == "--open") source = handle;
    }
    args.erase(args.begin(), args.begin() + 2);
  }
  Hooks nccl;
  if (!findHooks(source, &nccl)) return 3;

  if (!args.empty() && args[0] == "forwarded") {
    ncclComm_t comm = initOne(nccl, "init");
    const int status = driver::runForwarded(source, comm, std::vector<std::string>(args.begin() + 1, args.end()));
    if (status != 0) return status;
    destroyOne(nccl, "destroy", comm);
  } else {
    runHooks(nccl);
  }

  if (!then.empty()) {
    void* second = dlopen(then.c_str(), RTLD_NOW | RTLD_LOCAL);
    Hooks again;
    if (second == nullptr || !findHooks(second, &again)) return 5;
    // The same library both times, or another one (the real NCCL, bypassing us).
    driver::report("then", "same", nccl.ncclCommInitRank == again.ncclCommInitRank ? "1" : "0");
    destroyOne(again, "then.destroy", initOne(again, "then.init"));
  }
  std::printf("done\n");
  return 0;
}
