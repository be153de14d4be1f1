// The buffer block's owner (shim/ipc/buffer_block.h) on the host side: the board comes first
// (its id and token are what peers attach by), a block that cannot be allocated keeps nothing, and
// retiring lets go of the board, so nobody can attach it any more. The memory itself needs a
// GPU (the GPU tests allocate every block through this class).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include "have_device.h"
#include "ipc/buffer_block.h"

using namespace car;
using car::testing::haveDevice;

namespace {

// Whether a peer could attach the board `id` now (and map the block behind it).
bool peerCanAttach(int id, std::uint64_t token) {
  std::string problem;
  return SysvReleaseBoard::attach(id, token, &problem) != nullptr;
}

// A block around a new board; the board's id and token, as the set-up's record carries them.
std::unique_ptr<BufferBlock> newBlock(int* id, std::uint64_t* token) {
  std::string problem;
  std::unique_ptr<SysvReleaseBoard> board = SysvReleaseBoard::create(&problem);
  REQUIRE(board);
  *id = board->id();
  *token = board->token();
  return BufferBlock::create(std::move(board));
}

}  // namespace

TEST_CASE("buffer block: its board exists before its memory, and nothing is published before it", "[buffer-block]") {
  int id = -1;
  std::uint64_t token = 0;
  std::unique_ptr<BufferBlock> block = newBlock(&id, &token);
  REQUIRE(block);
  CHECK(block->base() == nullptr);
  CHECK(id >= 0);
  CHECK(token != 0);
  CHECK(block->published().address == 0);
  CHECK(peerCanAttach(id, token));
  CHECK_FALSE(peerCanAttach(id, token + 1));  // the id of another page
}

TEST_CASE("buffer block: retiring a block that holds no memory lets go of its board at once", "[buffer-block]") {
  int id = -1;
  std::uint64_t token = 0;
  std::unique_ptr<BufferBlock> block = newBlock(&id, &token);
  REQUIRE(block);
  REQUIRE(peerCanAttach(id, token));
  BufferBlock::retire(std::move(block), "comm 0x1 rank 0/2");
  // The board was marked for removal at creation: with its owner gone it is gone.
  CHECK_FALSE(peerCanAttach(id, token));
  BufferBlock::retire(nullptr, "nothing");  // a rank that never got a block
}

TEST_CASE("buffer block: allocation on the device, or nothing kept", "[buffer-block]") {
  int id = -1;
  std::uint64_t token = 0;
  std::unique_ptr<BufferBlock> block = newBlock(&id, &token);
  REQUIRE(block);
  const BlockLayout layout = blockLayoutFor(Config{});
  cudaStream_t stream = nullptr;  // none without a device: the allocation fails before using it
  if (haveDevice()) REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  const cudaError_t err = block->allocate(0, layout, stream);
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (!haveDevice()) {
    CHECK(err != cudaSuccess);
    CHECK(block->base() == nullptr);
    CHECK(block->published().address == 0);
    return;
  }
  REQUIRE(err == cudaSuccess);
  CHECK(block->base() != nullptr);
  CHECK(block->layout().totalBytes == layout.totalBytes);
  CHECK(block->published().address == reinterpret_cast<std::uint64_t>(block->base()));
  BufferBlock::retire(std::move(block), "comm 0x2 rank 0/2");  // no importer: freed at once
  CHECK_FALSE(peerCanAttach(id, token));
}
