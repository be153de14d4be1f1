// Scenario "cycles <n>": n create / all-reduce / destroy cycles (a 1-rank communicator and
// a 2-device ncclCommInitAll each time), with the process's open files and memory
// mappings counted after a warm-up cycle and at the end, so a leak per cycle shows.
#include <cstdio>

#include "../common/process_counts.h"
#include "driver_common.h"

namespace driver {
namespace {

int oneCycle() {
  alignas(256) static char buffer[2][4096];
  int failures = 0;
  ncclUniqueId id{};
  ncclComm_t single = nullptr;
  ncclComm_t pair[2] = {nullptr, nullptr};
  const int devices[2] = {0, 1};
  failures += ncclGetUniqueId(&id) != ncclSuccess;
  failures += ncclCommInitRank(&single, 1, id, 0) != ncclSuccess;
  failures += ncclCommInitAll(pair, 2, devices) != ncclSuccess;
  for (ncclComm_t comm : {single, pair[0], pair[1]}) {
    failures += ncclAllReduce(buffer[0], buffer[1], 256, ncclFloat32, ncclSum, comm, fakeStream()) != ncclSuccess;
    failures += ncclCommDestroy(comm) != ncclSuccess;
  }
  return failures;
}

}  // namespace

int runCycles(int cycles) {
  int failures = oneCycle();  // warm-up: first-use allocations are not leaks
  const long filesBefore = car::testing::openFileDescriptors();
  const long mappingsBefore = car::testing::memoryMappings();
  for (int i = 1; i < cycles; ++i) failures += oneCycle();
  std::printf("cycles=%d failures=%d files_before=%ld files_after=%ld mappings_before=%ld mappings_after=%ld\n", cycles,
              failures, filesBefore, car::testing::openFileDescriptors(), mappingsBefore, car::testing::memoryMappings());
  return failures == 0 ? 0 : 1;
}

}  // namespace driver
