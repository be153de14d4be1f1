// Creating and destroying engines leaks nothing: 1,000 create / all-reduce / destroy
// cycles leave the device's free memory where it started.
#include <catch2/catch.hpp>

#include "device_buffers.h"
#include "rank_group.h"

using namespace car;
using namespace car::testing;

TEST_CASE("1,000 create / all-reduce / destroy cycles leak no device memory", "[gpu][leak]") {
  constexpr int kDevice = 0;
  constexpr int kRanks = 4;
  constexpr std::size_t kCount = 4096;
  CHECK_CUDA(cudaSetDevice(kDevice));
  DeviceBuffers in(kRanks, kCount * 4), out(kRanks, kCount * 4);
  Config config;
  config.maxBytes = 1 << 20;
  config.maxBlocks = coResidentBlockLimit(kDevice, kRanks);
  { RankGroup warmUp(kDevice, kRanks, config); }  // first-use allocations of the runtime
  std::size_t freeBefore = 0, total = 0;
  CHECK_CUDA(cudaMemGetInfo(&freeBefore, &total));
  for (int cycle = 0; cycle < 1000; ++cycle) {
    RankGroup group(kDevice, kRanks, config);
    std::string why;
    const bool launched = group.allReduce(in.constPointers(), out.pointers(), kCount, ElementType::Float32, &why);
    INFO("cycle " << cycle << ": " << why);
    REQUIRE(launched);
    group.synchronize();
  }
  std::size_t freeAfter = 0;
  CHECK_CUDA(cudaMemGetInfo(&freeAfter, &total));
  // Each cycle allocates 4 blocks of 2 MiB; a leak of one cycle would show as >= 8 MiB.
  CHECK(freeAfter + (std::size_t{2} << 20) >= freeBefore);
}
