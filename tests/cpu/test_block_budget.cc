// NCCL_CAR_GPU_MEMORY_BYTES's ledger (shim/ipc/block_budget.h): a block fits or it does not,
// per GPU; what is given back makes room again; no bound means every block fits.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "ipc/block_budget.h"

using namespace car;

namespace {
constexpr std::size_t MiB = std::size_t{1} << 20;
}  // namespace

TEST_CASE("block budget: blocks fit up to the bound on their own GPU, and make room when given back",
          "[budget]") {
  const int device = 101;  // GPUs of their own: other tests' blocks never count here
  const int other = 102;
  auto first = reserveBlock(device, 48 * MiB, 100 * MiB);
  auto second = reserveBlock(device, 48 * MiB, 100 * MiB);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(blockBytesHeld(device) == 96 * MiB);
  CHECK_FALSE(reserveBlock(device, 48 * MiB, 100 * MiB));  // 144 MiB would exceed it
  CHECK(blockBytesHeld(device) == 96 * MiB);               // a refusal holds nothing
  CHECK(reserveBlock(other, 48 * MiB, 100 * MiB));          // another GPU has its own room
  first.reset();
  CHECK(blockBytesHeld(device) == 48 * MiB);
  CHECK(reserveBlock(device, 48 * MiB, 100 * MiB));
  CHECK_FALSE(reserveBlock(device, 101 * MiB, 100 * MiB));  // larger than the bound itself
  second.reset();
  CHECK(blockBytesHeld(device) == 0);
}

TEST_CASE("block budget: 0 is no bound; reservations from many threads add up exactly", "[budget]") {
  const int device = 103;
  std::vector<std::unique_ptr<BlockReservation>> held(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) held[t * 8 + i] = reserveBlock(device, 48 * MiB, 0);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& reservation : held) CHECK(reservation);
  CHECK(blockBytesHeld(device) == 64 * 48 * MiB);
  held.clear();
  CHECK(blockBytesHeld(device) == 0);
}
