// NCCL's own peer-to-peer settings, read the way NCCL 2.28 reads them, so that we never use
// peer access where the user told NCCL not to. NCCL_P2P_DISABLE=1 wins; NCCL_P2P_LEVEL is a
// path name (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS) or NCCL's old numbers (0 LOC,
// 1 PIX, 2 PXB, 3 PHB, 4 and up SYS); anything else leaves NCCL's default. We do not measure
// the PCIe distance between two GPUs, so every level between NVLink and SYS means "NVLink
// only" for us: we may forward where NCCL still uses PCIe peer access, never the reverse.
#pragma once

#include <cstdint>

namespace car {

enum class P2pLimit : std::int32_t {
  None = 0,        // unset, unknown or SYS: any peer access CUDA offers
  NvlinkOnly = 1,  // a level below SYS
  Off = 2,         // NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC (or 0)
};

// Pure: the two variables' values (null when unset).
P2pLimit parseP2pLimit(const char* disable, const char* level);

// This process's setting, read once.
P2pLimit ncclP2pLimit();

}  // namespace car
