// NCCL_P2P_DISABLE and NCCL_P2P_LEVEL, read as NCCL 2.28 reads them (shim/handshake/p2p_limit.h).
#include <catch2/catch.hpp>

#include "handshake/p2p_limit.h"

using namespace car;

TEST_CASE("p2p limit: unset or SYS leaves peer access to CUDA", "[p2p]") {
  CHECK(parseP2pLimit(nullptr, nullptr) == P2pLimit::None);
  CHECK(parseP2pLimit(nullptr, "SYS") == P2pLimit::None);
  CHECK(parseP2pLimit("0", "SYS") == P2pLimit::None);
  for (const char* old : {"4", "5", "17"}) CHECK(parseP2pLimit(nullptr, old) == P2pLimit::None);  // old numbers: SYS
  // Names are NCCL's, exactly: anything else is ignored, as NCCL ignores it.
  for (const char* unknown : {"sys", "nvl", "NVLINK", "", "x1"}) CHECK(parseP2pLimit(nullptr, unknown) == P2pLimit::None);
}

TEST_CASE("p2p limit: NCCL_P2P_DISABLE=1 and LOC turn it off", "[p2p]") {
  CHECK(parseP2pLimit("1", nullptr) == P2pLimit::Off);
  CHECK(parseP2pLimit("0x1", "SYS") == P2pLimit::Off);  // strtol base 0, and it wins over the level
  CHECK(parseP2pLimit(nullptr, "LOC") == P2pLimit::Off);
  CHECK(parseP2pLimit(nullptr, "0") == P2pLimit::Off);
  CHECK(parseP2pLimit("2", nullptr) == P2pLimit::None);  // only 1 disables
}

TEST_CASE("p2p limit: every level between NVLink and SYS means NVLink only for us", "[p2p]") {
  for (const char* level : {"NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "1", "2", "3"}) {
    INFO(level);
    CHECK(parseP2pLimit(nullptr, level) == P2pLimit::NvlinkOnly);
  }
}
