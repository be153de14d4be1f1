// A program that does not link libnccl: it finds the hooked NCCL functions only through
// dlsym(RTLD_DEFAULT), i.e. in the preloaded libnccl-car.so. Prints "<name> missing" for
// each one it cannot find, else one "<label> result=<rc>" line per call, like shim_driver.
// "shim_nolib_driver --load <libnccl.so.2>" first loads that NCCL privately (RTLD_LOCAL),
// as PyTorch does with its own copy: its functions are then not in the global scope.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "driver_steps.h"

namespace {

template <typename Function>
Function* find(const char* name, bool* complete) {
  void* symbol = dlsym(RTLD_DEFAULT, name);
  if (symbol == nullptr) {
    std::printf("%s missing\n", name);
    *complete = false;
  }
  return reinterpret_cast<Function*>(symbol);
}

#define FIND(name) auto* name##_ = find<decltype(::name)>(#name, &complete)

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 3 && std::string(argv[1]) == "--load" && dlopen(argv[2], RTLD_NOW | RTLD_LOCAL) == nullptr) {
    std::printf("cannot load %s\n", argv[2]);
    return 4;
  }
  bool complete = true;
  FIND(ncclAllReduce);
  FIND(ncclCommInitRank);
  FIND(ncclCommInitRankConfig);
  FIND(ncclCommInitRankScalable);
  FIND(ncclCommInitAll);
  FIND(ncclCommSplit);
  FIND(ncclCommShrink);
  FIND(ncclCommDestroy);
  FIND(ncclCommAbort);
  FIND(ncclCommFinalize);
  FIND(ncclGroupStart);
  FIND(ncclGroupEnd);
  if (!complete) return 3;

  using driver::step;
  namespace calls = standin::calls;
  ncclUniqueId id{};
  alignas(256) static char buffer[2][4096];
  ncclComm_t c1 = nullptr, c2 = nullptr, c3 = nullptr, c4 = nullptr, c5 = nullptr;
  ncclComm_t pair[2] = {nullptr, nullptr};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  step("init", calls::initRank(&c1, 1, id, 0), [&] { return ncclCommInitRank_(&c1, 1, id, 0); });
  step("init.cfg", calls::initRankConfig(&c2, 1, id, 0, &config),
       [&] { return ncclCommInitRankConfig_(&c2, 1, id, 0, &config); });
  step("init.scal", calls::initRankScalable(&c3, 1, 0, 1, &id, &config),
       [&] { return ncclCommInitRankScalable_(&c3, 1, 0, 1, &id, &config); });
  step("initall", calls::initAll(pair, 2, nullptr), [&] { return ncclCommInitAll_(pair, 2, nullptr); });
  step("split", calls::split(c1, 0, 0, &c4, nullptr), [&] { return ncclCommSplit_(c1, 0, 0, &c4, nullptr); });
  step("shrink", calls::shrink(c1, nullptr, 0, &c5, nullptr, 0),
       [&] { return ncclCommShrink_(c1, nullptr, 0, &c5, nullptr, 0); });
  step("g.start", calls::groupStart(), [&] { return ncclGroupStart_(); });
  step("ar", calls::allReduce(buffer[0], buffer[1], 1024, ncclFloat32, ncclSum, c1, nullptr),
       [&] { return ncclAllReduce_(buffer[0], buffer[1], 1024, ncclFloat32, ncclSum, c1, nullptr); });
  step("g.end", calls::groupEnd(), [&] { return ncclGroupEnd_(); });
  step("finalize", calls::onComm("ncclCommFinalize", c1), [&] { return ncclCommFinalize_(c1); });
  step("destroy", calls::onComm("ncclCommDestroy", c1), [&] { return ncclCommDestroy_(c1); });
  step("abort", calls::onComm("ncclCommAbort", c2), [&] { return ncclCommAbort_(c2); });
  int n = 0;
  for (ncclComm_t comm : {c3, c4, c5, pair[0], pair[1]}) {
    step("destroy." + std::to_string(n++), calls::onComm("ncclCommDestroy", comm),
         [&] { return ncclCommDestroy_(comm); });
  }
  std::printf("done\n");
  return 0;
}
