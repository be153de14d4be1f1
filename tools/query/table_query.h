// `nccl_car_query fingerprint`: this machine as a choice table sees it (plugin/machine_fingerprint.h);
// `nccl_car_query table PATH`: whether the library would follow that table, and its rows. The
// command-line tool writes tables (nccl-car tune) and reads them back through these, so the
// library's parser is the one reader of the format.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "json_writer.h"

namespace carquery {

// [--device D] [--nccl-version CODE]: {"description", "fingerprint", "default_path"}. False with
// *error when the arguments are wrong, or (*askable false) when the device cannot be asked.
bool writeFingerprint(JsonWriter& json, const std::vector<std::string>& args, bool* askable, std::string* error);

// PATH --fingerprint HEX: {"path", "usable", "why", "digest", "rows": [{collective, ranks,
// family, from, to, winner}]}. A table the library would refuse is an answer (usable false,
// why), not an error.
bool writeTable(JsonWriter& json, const std::vector<std::string>& args, std::string* error);

// The table at `path` into config->table (and its digest), for the machine of `fingerprint`
// (16 hexadecimal digits). False with *error saying why the library would not follow it.
bool loadTableInto(const std::string& path, const std::string& fingerprint, car::Config* config, std::string* error);

}  // namespace carquery
