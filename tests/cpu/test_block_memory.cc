// A buffer block's memory outlives its block (shim/ipc/block_memory.h): it is kept with its
// room under NCCL_CAR_GPU_MEMORY_BYTES and taken by the next block of its size on its GPU,
// so a release never calls cudaFree. A pool over a fake allocator: the bookkeeping alone.
#include <catch2/catch.hpp>

#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "ipc/block_budget.h"
#include "ipc/block_memory.h"

using namespace car;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// Hands out distinct fake addresses and counts what the pool allocates and frees.
struct FakeDevice {
  std::mutex mutex;  // the pool allocates outside its own lock, as cudaMalloc may take long
  std::uintptr_t next = 0x10000;
  int allocations = 0;
  std::vector<void*> freed;
  BlockMemoryPool pool{[this](int, std::size_t bytes, void** base) {
                         std::lock_guard<std::mutex> lock(mutex);
                         *base = reinterpret_cast<void*>(next);
                         next += bytes;
                         ++allocations;
                         return cudaSuccess;
                       },
                       [this](int, void* base) {
                         std::lock_guard<std::mutex> lock(mutex);
                         freed.push_back(base);
                       }};
};

std::unique_ptr<BlockMemory> allocated(FakeDevice& fake, int device, std::size_t bytes, std::size_t limit = 0) {
  std::unique_ptr<BlockMemory> memory = BlockMemory::claim(fake.pool, device, bytes, limit);
  REQUIRE(memory);
  REQUIRE(memory->allocate() == cudaSuccess);
  return memory;
}

}  // namespace

TEST_CASE("block memory: a released block's memory is kept and taken by the next block of its size",
          "[block-memory]") {
  FakeDevice fake;
  const int device = 201;  // GPUs of their own: the budget's ledger is process-wide
  std::unique_ptr<BlockMemory> first = allocated(fake, device, 48 * MiB);
  CHECK_FALSE(first->reused());
  void* const base = first->base();
  CHECK(base != nullptr);
  CHECK(blockBytesHeld(device) == 48 * MiB);
  first.reset();  // its block went
  CHECK(fake.freed.empty());
  CHECK(fake.pool.keptCount(device) == 1);
  CHECK(fake.pool.keptBytes(device) == 48 * MiB);
  CHECK(blockBytesHeld(device) == 48 * MiB);  // kept memory holds its room

  std::unique_ptr<BlockMemory> second = allocated(fake, device, 48 * MiB);
  CHECK(second->reused());
  CHECK(second->base() == base);
  CHECK(fake.allocations == 1);  // nothing new allocated
  CHECK(fake.pool.keptCount(device) == 0);
  CHECK(blockBytesHeld(device) == 48 * MiB);

  // Another GPU neither takes it nor loses it.
  second.reset();
  std::unique_ptr<BlockMemory> elsewhere = allocated(fake, device + 1, 48 * MiB);
  CHECK_FALSE(elsewhere->reused());
  CHECK(fake.pool.keptCount(device) == 1);
  CHECK(fake.freed.empty());
}

TEST_CASE("block memory: room never allocated is given back, and kept memory is room under the bound",
          "[block-memory]") {
  FakeDevice fake;
  const int device = 203;
  {
    std::unique_ptr<BlockMemory> unused = BlockMemory::claim(fake.pool, device, 48 * MiB, 0);
    REQUIRE(unused);
    CHECK(blockBytesHeld(device) == 48 * MiB);
  }  // a communicator judged not ours: it allocated nothing
  CHECK(blockBytesHeld(device) == 0);
  CHECK(fake.pool.keptCount(device) == 0);
  CHECK(fake.allocations == 0);

  // A bound of one block: while one lives there is no room for another, and once it has gone
  // its kept memory is the room of the next.
  std::unique_ptr<BlockMemory> live = allocated(fake, device, 48 * MiB, 50 * MiB);
  CHECK_FALSE(BlockMemory::claim(fake.pool, device, 48 * MiB, 50 * MiB));
  live.reset();
  std::unique_ptr<BlockMemory> next = BlockMemory::claim(fake.pool, device, 48 * MiB, 50 * MiB);
  REQUIRE(next);
  CHECK(next->reused());
  CHECK(blockBytesHeld(device) == 48 * MiB);
}

TEST_CASE("block memory: a block of another size frees what is kept on its GPU only", "[block-memory]") {
  FakeDevice fake;
  const int device = 205;
  const int other = 206;
  void* const kept = allocated(fake, device, 48 * MiB)->base();
  allocated(fake, other, 48 * MiB).reset();
  REQUIRE(fake.pool.keptCount(device) == 1);
  std::unique_ptr<BlockMemory> larger = allocated(fake, device, 96 * MiB);
  CHECK_FALSE(larger->reused());
  REQUIRE(fake.freed.size() == 1);
  CHECK(fake.freed[0] == kept);
  CHECK(fake.pool.keptCount(device) == 0);
  CHECK(fake.pool.keptCount(other) == 1);
  CHECK(blockBytesHeld(device) == 96 * MiB);  // the freed memory's room went with it
}

TEST_CASE("block memory: memory a graph replay may still use is freed, not handed to the next block",
          "[block-memory]") {
  FakeDevice fake;
  const int device = 209;
  std::unique_ptr<BlockMemory> captured = allocated(fake, device, 48 * MiB);
  void* const base = captured->base();
  captured->forgoReuse();
  captured.reset();
  REQUIRE(fake.freed.size() == 1);
  CHECK(fake.freed[0] == base);
  CHECK(fake.pool.keptCount(device) == 0);
  CHECK(blockBytesHeld(device) == 0);
  CHECK_FALSE(allocated(fake, device, 48 * MiB)->reused());
}

TEST_CASE("block memory: claims and releases from many threads never hand one allocation to two blocks",
          "[block-memory]") {
  FakeDevice fake;
  const int device = 207;
  std::mutex liveMutex;
  std::set<void*> live;  // bases some thread holds now
  int handedTwice = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::unique_ptr<BlockMemory> memory = BlockMemory::claim(fake.pool, device, 48 * MiB, 0);
        if (!memory || memory->allocate() != cudaSuccess) continue;
        {
          std::lock_guard<std::mutex> lock(liveMutex);
          if (!live.insert(memory->base()).second) ++handedTwice;
        }
        std::this_thread::yield();  // holds it while the others claim
        {
          std::lock_guard<std::mutex> lock(liveMutex);
          live.erase(memory->base());
        }
        memory.reset();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(handedTwice == 0);
  // At most 8 were ever live at once, so at most 8 were ever allocated, each kept at the end.
  CHECK(fake.allocations <= 8);
  CHECK(fake.pool.keptCount(device) == static_cast<std::size_t>(fake.allocations));
  CHECK(fake.freed.empty());
  CHECK(blockBytesHeld(device) == static_cast<std::size_t>(fake.allocations) * 48 * MiB);
}
