#include "handshake/p2p_limit.h"

#include <cstdlib>
#include <cstring>

namespace car {
namespace {

// NCCL's path types up to SYS, in NCCL's order; NVL (index 1) is the only one we can check.
const char* const kPathNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS"};
constexpr int kLoc = 0;
constexpr int kSys = 9;
// NCCL's old numbering: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 (and above) SYS.
const int kOldLevels[] = {kLoc, 4, 5, 8, kSys};

int pathLevel(const char* text) {
  for (int i = 0; i <= kSys; ++i) {
    if (std::strcmp(text, kPathNames[i]) == 0) return i;
  }
  if (text[0] < '0' || text[0] > '9') return -1;
  const long old = std::strtol(text, nullptr, 0);
  return old >= 4 ? kSys : kOldLevels[old];  // a leading digit: never negative
}

}  // namespace

P2pLimit parseP2pLimit(const char* disable, const char* level) {
  if (disable != nullptr && std::strtol(disable, nullptr, 0) == 1) return P2pLimit::Off;
  const int path = level != nullptr ? pathLevel(level) : -1;
  if (path < 0 || path == kSys) return P2pLimit::None;
  return path == kLoc ? P2pLimit::Off : P2pLimit::NvlinkOnly;
}

P2pLimit ncclP2pLimit() {
  static const P2pLimit limit = parseP2pLimit(std::getenv("NCCL_P2P_DISABLE"), std::getenv("NCCL_P2P_LEVEL"));
  return limit;
}

}  // namespace car
