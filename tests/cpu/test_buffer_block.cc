// The buffer block's owner (shim/ipc/buffer_block.h) on the host side: the board comes first
// and is published with the block, a block that cannot be allocated keeps nothing, and
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
bool peerCanAttach(int id) {
  std::string problem;
  return SysvReleaseBoard::attach(id, &problem) != nullptr;
}

}  // namespace

TEST_CASE("buffer block: its board exists before its memory and is published with it", "[buffer-block]") {
  std::string problem;
  std::unique_ptr<BufferBlock> block = BufferBlock::create(&problem);
  REQUIRE(block);
  CHECK(block->base() == nullptr);
  HandshakeRecord record{};
  record.boardId = -1;
  block->publish(&record);
  CHECK(record.boardId >= 0);
  CHECK(record.blockAddress == 0);
  CHECK(peerCanAttach(record.boardId));
}

TEST_CASE("buffer block: retiring a block that holds no memory lets go of its board at once", "[buffer-block]") {
  std::string problem;
  std::unique_ptr<BufferBlock> block = BufferBlock::create(&problem);
  REQUIRE(block);
  HandshakeRecord record{};
  block->publish(&record);
  REQUIRE(peerCanAttach(record.boardId));
  BufferBlock::retire(std::move(block), "comm 0x1 rank 0/2");
  // The board was marked for removal at creation: with its owner gone it is gone.
  CHECK_FALSE(peerCanAttach(record.boardId));
  BufferBlock::retire(nullptr, "nothing");  // a rank that never got a block
}

TEST_CASE("buffer block: allocation on the device, or nothing kept", "[buffer-block]") {
  std::string problem;
  std::unique_ptr<BufferBlock> block = BufferBlock::create(&problem);
  REQUIRE(block);
  const BlockLayout layout = blockLayoutFor(Config{});
  cudaStream_t stream = nullptr;  // none without a device: the allocation fails before using it
  if (haveDevice()) REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  const cudaError_t err = block->allocate(0, layout, stream);
  if (stream != nullptr) cudaStreamDestroy(stream);
  HandshakeRecord record{};
  block->publish(&record);
  if (!haveDevice()) {
    CHECK(err != cudaSuccess);
    CHECK(block->base() == nullptr);
    CHECK(record.blockAddress == 0);
    return;
  }
  REQUIRE(err == cudaSuccess);
  CHECK(block->base() != nullptr);
  CHECK(block->layout().totalBytes == layout.totalBytes);
  CHECK(record.blockAddress == reinterpret_cast<std::uint64_t>(block->base()));
  BufferBlock::retire(std::move(block), "comm 0x2 rank 0/2");  // no importer: freed at once
  CHECK_FALSE(peerCanAttach(record.boardId));
}
