#include "handshake/p2p_limit.h"

#include <cstdlib>
#include <cstring>

namespace car {
namespace {

// NCCL's path types up to SYS, in NCCL's order, and what each level means for us.
struct Level {
  const char* name;
  P2pLimit limit;
};
const Level kLevels[] = {{"LOC", P2pLimit::Off},     {"NVL", P2pLimit::NvlinkOnly}, {"NVB", P2pLimit::NvlinkOnly},
                         {"C2C", P2pLimit::NvlinkOnly}, {"PIX", P2pLimit::UpToPix},  {"PXB", P2pLimit::UpToPxb},
                         {"P2C", P2pLimit::UpToPxb},  {"PXN", P2pLimit::UpToPxb},    {"PHB", P2pLimit::UpToPhb},
                         {"SYS", P2pLimit::AnyPath}};
// NCCL's old numbering: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 (and above) SYS.
const P2pLimit kOldLevels[] = {P2pLimit::Off, P2pLimit::UpToPix, P2pLimit::UpToPxb, P2pLimit::UpToPhb,
                               P2pLimit::AnyPath};

// nvmlGpuTopologyLevel_t (nvml.h): INTERNAL 0, SINGLE 10, MULTIPLE 20, HOSTBRIDGE 30, NODE 40,
// SYSTEM 50.
constexpr int kNvmlInternal = 0;
constexpr int kNvmlSingle = 10;
constexpr int kNvmlMultiple = 20;
constexpr int kNvmlHostBridge = 30;
constexpr int kNvmlNode = 40;
constexpr int kNvmlSystem = 50;

// The longest PCIe path a limit allows (Unknown: none).
PciePath longestAllowed(P2pLimit limit) {
  switch (limit) {
    case P2pLimit::None: return PciePath::Phb;
    case P2pLimit::UpToPix: return PciePath::Pix;
    case P2pLimit::UpToPxb: return PciePath::Pxb;
    case P2pLimit::UpToPhb: return PciePath::Phb;
    case P2pLimit::AnyPath: return PciePath::Sys;
    case P2pLimit::NvlinkOnly:
    case P2pLimit::Off: break;
  }
  return PciePath::Unknown;
}

}  // namespace

const char* pciePathName(PciePath path) {
  switch (path) {
    case PciePath::Pix: return "PIX";
    case PciePath::Pxb: return "PXB";
    case PciePath::Phb: return "PHB";
    case PciePath::Sys: return "SYS";
    case PciePath::Unknown: break;
  }
  return "unknown";
}

PciePath pciePathOfNvmlLevel(int level) {
  switch (level) {
    case kNvmlInternal:
    case kNvmlSingle: return PciePath::Pix;
    case kNvmlMultiple: return PciePath::Pxb;
    case kNvmlHostBridge:
    case kNvmlNode: return PciePath::Phb;
    case kNvmlSystem: return PciePath::Sys;
    default: return PciePath::Unknown;
  }
}

bool p2pLimitAllows(P2pLimit limit, PciePath path) {
  return path != PciePath::Unknown && longestAllowed(limit) != PciePath::Unknown && path <= longestAllowed(limit);
}

P2pLimit stricterP2pLimit(P2pLimit a, P2pLimit b) {
  if (a == P2pLimit::Off || b == P2pLimit::Off) return P2pLimit::Off;
  if (a == P2pLimit::NvlinkOnly || b == P2pLimit::NvlinkOnly) return P2pLimit::NvlinkOnly;
  // Both allow some PCIe path: the shorter wins; between None and UpToPhb (the same paths), the
  // one a user set, so that reasons name it.
  if (longestAllowed(a) != longestAllowed(b)) return longestAllowed(a) < longestAllowed(b) ? a : b;
  return a == P2pLimit::None ? b : a;
}

const char* p2pLimitText(P2pLimit limit) {
  switch (limit) {
    case P2pLimit::None: return "no NCCL_P2P_LEVEL";
    case P2pLimit::NvlinkOnly: return "an NCCL_P2P_LEVEL of NVLink only";
    case P2pLimit::Off: return "NCCL_P2P_DISABLE or NCCL_P2P_LEVEL=LOC";
    case P2pLimit::UpToPix: return "NCCL_P2P_LEVEL=PIX";
    case P2pLimit::UpToPxb: return "NCCL_P2P_LEVEL=PXB";
    case P2pLimit::UpToPhb: return "NCCL_P2P_LEVEL=PHB";
    case P2pLimit::AnyPath: return "NCCL_P2P_LEVEL=SYS";
  }
  return "?";
}

P2pLimit parseP2pLimit(const char* disable, const char* level) {
  if (disable != nullptr && std::strtol(disable, nullptr, 0) == 1) return P2pLimit::Off;
  if (level == nullptr) return P2pLimit::None;
  for (const Level& known : kLevels) {
    if (std::strcmp(level, known.name) == 0) return known.limit;
  }
  if (level[0] < '0' || level[0] > '9') return P2pLimit::None;
  const long old = std::strtol(level, nullptr, 0);  // a leading digit: never negative
  return old >= 4 ? P2pLimit::AnyPath : kOldLevels[old];
}

P2pLimit ncclP2pLimit() {
  static const P2pLimit limit = parseP2pLimit(std::getenv("NCCL_P2P_DISABLE"), std::getenv("NCCL_P2P_LEVEL"));
  return limit;
}

}  // namespace car
