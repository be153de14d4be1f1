// `nccl_car_query settings`: the settings table, and what this process's environment makes
// of it, read by the library's own code (plugin/settings_table.h).
#pragma once

#include "config.h"
#include "json_writer.h"

namespace carquery {

// Writes {"settings": [one object per row], "unknown"}.
// `environment` is every NAME=value of the process, for the NCCL_CAR_* names no row reads.
void writeSettings(JsonWriter& json, const car::EnvironmentLookup& lookup, char** environment);

}  // namespace carquery
