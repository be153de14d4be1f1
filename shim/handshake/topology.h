// How this rank's GPU reaches another GPU: NVLink from NVML (loaded at run time; a machine
// without it simply reports no NVLink), peer access from CUDA where the peer's GPU is
// visible to this process, else from NVML.
#pragma once

#include <string>

namespace car {

struct PairLink {
  bool p2p = false;
  bool nvlink = false;
};

// Bus ids as CUDA prints them ("0000:3B:00.0"). The same bus id means the same GPU, which
// counts as connected both ways.
PairLink linkBetween(int myDevice, const std::string& myBusId, const std::string& peerBusId);

// Whether NVML could be loaded (for the log).
bool nvmlAvailable();

}  // namespace car
