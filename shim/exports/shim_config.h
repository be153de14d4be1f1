// Process-wide state every hook needs first: the settings (read once, at the first hooked
// call, never when the library is merely loaded) and where our own library sits.
#pragma once

#include "config.h"

namespace car {

// Reads NCCL_CAR_* once, sets the log level and the log file, and WARNs each bad value.
const Config& shimConfig();

// Base address of libnccl-car.so, to tell our own symbols from the real NCCL's.
const void* ownLibraryBase();

}  // namespace car
