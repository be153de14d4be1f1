// Process-wide state every hook needs first: the settings (read once, at the first hooked
// call, never when the library is merely loaded) and where our own library sits.
#pragma once

#include "config.h"

namespace car {

// Reads NCCL_CAR_* once, sets the log level and the log file, and WARNs each bad value.
const Config& shimConfig();

// shimConfig() with the choice table that applies on this machine (plugin/choice_table.h),
// loaded once, at the first call, from the first set-up (which knows its device; the machine's
// fingerprint needs one): NCCL_CAR_TABLE's file, else this machine's in the cache folder. A
// table that cannot be used is said in one WARN, and the built-in rule applies; none at all
// is said at INFO. Every set-up takes its record's settings and its engine's from here.
const Config& setupConfig(int device);

// Base address of libnccl-car.so, to tell our own symbols from the real NCCL's.
const void* ownLibraryBase();

}  // namespace car
