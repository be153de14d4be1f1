// What the set-up measures of one pair of GPUs (shim/handshake/topology.h, probeLink), asked of
// a fake NVML: NVLink, NVML's P2P write status and the PCIe path beside CUDA's own answer.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "handshake/topology.h"

using namespace car;

namespace {

// A machine of GPUs known by bus id; each answer of NVML per pair, and whether a call fails.
struct FakeMachine {
  std::map<std::string, int> gpus;    // bus id -> index
  bool nvlink = false;
  bool write = true;
  bool read = true;
  int level = 10;                     // nvmlGpuTopologyLevel_t: SINGLE
  bool statusFails = false;
} gFake;

nvml::Device deviceOf(int index) { return reinterpret_cast<nvml::Device>(static_cast<std::uintptr_t>(index + 1)); }

nvml::Return handleByBusId(const char* busId, nvml::Device* device) {
  const auto found = gFake.gpus.find(busId);
  if (found == gFake.gpus.end()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = deviceOf(found->second);
  return nvml::kSuccess;
}

nvml::Return p2pStatus(nvml::Device a, nvml::Device b, int capability, int* status) {
  if (gFake.statusFails || a == b) return 3;  // NVML_ERROR_NOT_SUPPORTED
  const bool ok = capability == nvml::kP2PCapsNvlink ? gFake.nvlink
                  : capability == nvml::kP2PCapsWrite ? gFake.write
                                                      : gFake.read;
  *status = ok ? nvml::kP2PStatusOk : 4;  // NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED
  return nvml::kSuccess;
}

nvml::Return topologyAncestor(nvml::Device, nvml::Device, int* level) {
  *level = gFake.level;
  return nvml::kSuccess;
}

nvml::Api fakeNvml(bool withTopology = true) {
  gFake = FakeMachine{};
  gFake.gpus = {{"0000:18:00.0", 0}, {"0000:3B:00.0", 1}};
  nvml::Api api;
  api.handleByBusId = &handleByBusId;
  api.p2pStatus = &p2pStatus;
  api.topologyAncestor = withTopology ? &topologyAncestor : nullptr;
  api.ok = true;
  return api;
}

PairLink probe(const nvml::Api* api, std::optional<bool> cuda) { return probeLink(api, cuda, "0000:18:00.0", "0000:3B:00.0"); }

}  // namespace

TEST_CASE("topology: a PCIe pair as NVML reports it, beside CUDA's answer", "[topology][pcie]") {
  const nvml::Api api = fakeNvml();
  PairLink link = probe(&api, true);
  CHECK(link.p2p);
  CHECK_FALSE(link.nvlink);
  CHECK(link.nvmlWrite);
  CHECK(link.path == PciePath::Pix);
  // The path, level by level.
  gFake.level = 20;
  CHECK(probe(&api, true).path == PciePath::Pxb);
  gFake.level = 40;
  CHECK(probe(&api, true).path == PciePath::Phb);
  gFake.level = 50;
  CHECK(probe(&api, true).path == PciePath::Sys);
  // CUDA and NVML disagree: both answers are kept, for the verdict to compare.
  gFake.write = false;
  link = probe(&api, true);
  CHECK(link.p2p);
  CHECK_FALSE(link.nvmlWrite);
  // CUDA says no, whatever NVML says.
  gFake.write = true;
  CHECK_FALSE(probe(&api, false).p2p);
}

TEST_CASE("topology: NVLink from NVML; NVML's read status where CUDA cannot see the peer", "[topology]") {
  const nvml::Api api = fakeNvml();
  gFake.nvlink = true;
  CHECK(probe(&api, true).nvlink);
  CHECK(probe(&api, std::nullopt).p2p);
  gFake.read = false;
  CHECK_FALSE(probe(&api, std::nullopt).p2p);
  CHECK(probe(&api, true).p2p);  // CUDA's answer wins where it has one
}

TEST_CASE("topology: without NVML, or where NVML fails, nothing is claimed", "[topology]") {
  PairLink link = probe(nullptr, true);
  CHECK(link.p2p);
  CHECK_FALSE(link.nvlink);
  CHECK_FALSE(link.nvmlWrite);
  CHECK(link.path == PciePath::Unknown);
  CHECK_FALSE(probe(nullptr, std::nullopt).p2p);

  nvml::Api api = fakeNvml();
  gFake.statusFails = true;
  link = probe(&api, true);
  CHECK_FALSE(link.nvmlWrite);
  CHECK_FALSE(link.nvlink);
  // A GPU NVML does not know (not by that bus id).
  api = fakeNvml();
  CHECK(probeLink(&api, true, "0000:18:00.0", "0000:AF:00.0").path == PciePath::Unknown);
  // An NVML without the topology call: the path is unknown.
  api = fakeNvml(false);
  CHECK(probe(&api, true).path == PciePath::Unknown);
  CHECK(probe(&api, true).nvmlWrite);
}

TEST_CASE("topology: two ranks on one GPU are connected both ways", "[topology]") {
  const PairLink same = sameGpuLink();
  CHECK(same.p2p);
  CHECK(same.nvlink);
  CHECK(same.nvmlWrite);
}
