#include "table_query.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "choice_table.h"
#include "machine_fingerprint.h"

namespace carquery {
namespace {

bool number(const std::string& text, std::uint64_t* value) { return car::parseUnsigned(text.c_str(), value); }

bool fingerprintOf(const std::string& text, std::uint64_t* value) {
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  *value = std::strtoull(text.c_str(), nullptr, 16);
  return true;
}

const char* environment(const char* name) { return secure_getenv(name); }

}  // namespace

bool writeFingerprint(JsonWriter& json, const std::vector<std::string>& args, bool* askable, std::string* error) {
  *askable = true;
  std::uint64_t device = 0, ncclVersion = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool hasValue = i + 1 < args.size();
    if (args[i] == "--device" && hasValue && number(args[i + 1], &device) && device < 1024) {
      ++i;
    } else if (args[i] == "--nccl-version" && hasValue && number(args[i + 1], &ncclVersion) && ncclVersion < 1000000) {
      ++i;
    } else {
      return *error = "cannot read '" + args[i] + "'", false;
    }
  }
  car::MachineDescription machine;
  const cudaError_t err = car::describeMachine(static_cast<int>(device), static_cast<int>(ncclVersion), &machine);
  if (err != cudaSuccess) {
    *askable = false;
    return *error = std::string("cannot ask the GPU: ") + cudaGetErrorString(err), false;
  }
  json.beginObject().key("description").string(machine.text).key("fingerprint").string(car::hex64(machine.fingerprint));
  json.key("default_path").string(car::defaultTablePath(machine.fingerprint, &environment)).endObject();
  return true;
}

bool loadTableInto(const std::string& path, const std::string& fingerprint, car::Config* config, std::string* error) {
  std::uint64_t expected = 0;
  if (!fingerprintOf(fingerprint, &expected)) return *error = "a fingerprint is 16 hexadecimal digits", false;
  std::ifstream file(path);
  if (!file) return *error = "cannot read " + path, false;
  std::ostringstream text;
  text << file.rdbuf();
  std::optional<car::ChoiceTable> table = car::ChoiceTable::parse(text.str(), expected, error);
  if (!table) return false;
  config->tableDigest = table->digest();
  config->table = std::make_shared<const car::ChoiceTable>(std::move(*table));
  return true;
}

bool writeTable(JsonWriter& json, const std::vector<std::string>& args, std::string* error) {
  if (args.size() != 3 || args[1] != "--fingerprint") return *error = "table PATH --fingerprint HEX", false;
  car::Config config;
  std::string why;
  const bool usable = loadTableInto(args[0], args[2], &config, &why);
  json.beginObject().key("path").string(args[0]).key("usable").boolean(usable).key("why");
  if (usable) json.null();
  else json.string(why);
  json.key("digest").string(usable ? car::hex64(config.tableDigest) : "");
  json.key("rows").beginArray();
  if (usable) {
    for (const car::ChoiceRow& row : config.table->rows()) {
      json.beginObject().key("collective").string(car::collectiveName(row.collective));
      json.key("ranks").number(static_cast<std::uint64_t>(row.ranks));
      json.key("links").string(car::linksName(row.links));
      json.key("family").string(row.family ? car::typeFamilyName(*row.family) : "any");
      json.key("from").number(row.fromBytes).key("to").number(row.toBytes);
      json.key("winner").string(row.kernel ? car::algorithmName(*row.kernel) : "nccl").endObject();
    }
  }
  json.endArray().endObject();
  return true;
}

}  // namespace carquery
