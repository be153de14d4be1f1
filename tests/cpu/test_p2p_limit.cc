// NCCL_P2P_DISABLE and NCCL_P2P_LEVEL, read as NCCL 2.28 reads them, and the PCIe paths each
// level allows (shim/handshake/p2p_limit.h).
#include <catch2/catch.hpp>

#include <string>

#include "handshake/p2p_limit.h"

using namespace car;

TEST_CASE("p2p limit: unset or unknown leaves NCCL's default; SYS allows every path", "[p2p]") {
  CHECK(parseP2pLimit(nullptr, nullptr) == P2pLimit::None);
  CHECK(parseP2pLimit(nullptr, "SYS") == P2pLimit::AnyPath);
  CHECK(parseP2pLimit("0", "SYS") == P2pLimit::AnyPath);
  for (const char* old : {"4", "5", "17"}) CHECK(parseP2pLimit(nullptr, old) == P2pLimit::AnyPath);  // old numbers: SYS
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

TEST_CASE("p2p limit: NVLink levels, and PCIe levels up to their path", "[p2p]") {
  for (const char* level : {"NVL", "NVB", "C2C"}) {
    INFO(level);
    CHECK(parseP2pLimit(nullptr, level) == P2pLimit::NvlinkOnly);
  }
  CHECK(parseP2pLimit(nullptr, "PIX") == P2pLimit::UpToPix);
  CHECK(parseP2pLimit(nullptr, "1") == P2pLimit::UpToPix);
  // P2C and PXN lie between PXB and PHB in NCCL's order: a PCIe path through a host bridge is beyond them.
  for (const char* level : {"PXB", "P2C", "PXN", "2"}) {
    INFO(level);
    CHECK(parseP2pLimit(nullptr, level) == P2pLimit::UpToPxb);
  }
  CHECK(parseP2pLimit(nullptr, "PHB") == P2pLimit::UpToPhb);
  CHECK(parseP2pLimit(nullptr, "3") == P2pLimit::UpToPhb);
}

TEST_CASE("p2p limit: which PCIe paths each limit allows; across sockets only with SYS", "[p2p]") {
  const PciePath paths[] = {PciePath::Pix, PciePath::Pxb, PciePath::Phb, PciePath::Sys};
  auto allowed = [&](P2pLimit limit) {
    int count = 0;
    for (PciePath path : paths) {
      if (!p2pLimitAllows(limit, path)) break;  // the allowed paths are a prefix
      ++count;
    }
    for (int p = count; p < 4; ++p) CHECK_FALSE(p2pLimitAllows(limit, paths[p]));
    return count;
  };
  CHECK(allowed(P2pLimit::Off) == 0);
  CHECK(allowed(P2pLimit::NvlinkOnly) == 0);
  CHECK(allowed(P2pLimit::UpToPix) == 1);
  CHECK(allowed(P2pLimit::UpToPxb) == 2);
  CHECK(allowed(P2pLimit::UpToPhb) == 3);
  CHECK(allowed(P2pLimit::None) == 3);  // NCCL's default: never across sockets
  CHECK(allowed(P2pLimit::AnyPath) == 4);
  for (std::int32_t limit = 0; limit < kP2pLimitCount; ++limit) {
    CHECK_FALSE(p2pLimitAllows(static_cast<P2pLimit>(limit), PciePath::Unknown));
  }
}

TEST_CASE("p2p limit: the most restrictive rank's limit applies", "[p2p]") {
  CHECK(stricterP2pLimit(P2pLimit::AnyPath, P2pLimit::UpToPxb) == P2pLimit::UpToPxb);
  CHECK(stricterP2pLimit(P2pLimit::UpToPix, P2pLimit::UpToPxb) == P2pLimit::UpToPix);
  CHECK(stricterP2pLimit(P2pLimit::None, P2pLimit::AnyPath) == P2pLimit::None);
  CHECK(stricterP2pLimit(P2pLimit::None, P2pLimit::UpToPhb) == P2pLimit::UpToPhb);  // the same paths: the one set
  CHECK(stricterP2pLimit(P2pLimit::UpToPhb, P2pLimit::None) == P2pLimit::UpToPhb);
  CHECK(stricterP2pLimit(P2pLimit::UpToPix, P2pLimit::NvlinkOnly) == P2pLimit::NvlinkOnly);
  CHECK(stricterP2pLimit(P2pLimit::NvlinkOnly, P2pLimit::Off) == P2pLimit::Off);
}

TEST_CASE("p2p limit: NVML's topology levels as NCCL's path types", "[p2p]") {
  CHECK(pciePathOfNvmlLevel(0) == PciePath::Pix);   // NVML_TOPOLOGY_INTERNAL: one board
  CHECK(pciePathOfNvmlLevel(10) == PciePath::Pix);  // SINGLE: one switch
  CHECK(pciePathOfNvmlLevel(20) == PciePath::Pxb);  // MULTIPLE
  CHECK(pciePathOfNvmlLevel(30) == PciePath::Phb);  // HOSTBRIDGE
  CHECK(pciePathOfNvmlLevel(40) == PciePath::Phb);  // NODE: host bridges of one socket
  CHECK(pciePathOfNvmlLevel(50) == PciePath::Sys);  // SYSTEM: across sockets
  CHECK(pciePathOfNvmlLevel(25) == PciePath::Unknown);
  CHECK(std::string(pciePathName(PciePath::Sys)) == "SYS");
}
