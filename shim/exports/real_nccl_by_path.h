// The real libnccl.so.2 opened by path. Needed when we are the libnccl.so.2 the program
// loaded (through libnccl-car-audit.so, or a drop-in directory first on LD_LIBRARY_PATH):
// then dlopen("libnccl.so.2") finds only us.
#pragma once

#include <string>

namespace car {

// A dlopen handle of the real NCCL (never our own file), or nullptr. In order:
//  1. the audit module's answer: the NCCL the program asked for, or NCCL_CAR_NCCL_LIB;
//  2. unless NCCL_CAR_NCCL_LIB is set (`configured`): the first libnccl.so.2 that is not our
//     own file in the directories the loader searches for the program (LD_LIBRARY_PATH, its
//     RUNPATH, the system folders), then in /usr/local/cuda/lib64.
// *origin (static storage) says which, for the log; on failure *failure gets the reason
// appended (`configured` leaves it as it is).
void* openRealNcclByPath(bool configured, const char** origin, std::string* failure);

}  // namespace car
