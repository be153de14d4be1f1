// `nccl_car_query log-samples`: log lines of every kind tools/nccl-car reads, made by the
// library's own formatter (plugin/log_format.h) and counters (plugin/stats.h), each with the
// facts it was made from. The CLI's parser tests read these instead of lines of their own.
#pragma once

#include "json_writer.h"

namespace carquery {

// Writes {"samples": [{"kind", "line", "host", "pid", "level", facts of that kind...}]}.
// Kinds: real-nccl-found, setup-eligible and released (rank, ranks; released also taken
// {kernel: calls}, bytes, forwarded {reason: calls}), setup-not-eligible (rank, ranks,
// reason), warn (file, source_line, text), taken-call (kernel, type, op), audit-served.
void writeLogSamples(JsonWriter& json);

}  // namespace carquery
