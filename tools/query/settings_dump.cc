#include "settings_dump.h"

#include <cstring>
#include <string>

#include "settings_table.h"

namespace carquery {
namespace {

using car::SettingSpec;
using car::SettingType;

// The value as JSON of its kind: flags as booleans, numbers as numbers, an unset path as null.
void writeValue(JsonWriter& json, const SettingSpec& spec, const car::Config& config) {
  switch (spec.type) {
    case SettingType::Flag: json.boolean(spec.field.read(config) != 0); return;
    case SettingType::Choice: json.string(spec.choiceName(spec.field.read(config))); return;
    case SettingType::Bytes:
    case SettingType::Count: json.number(spec.field.read(config)); return;
    case SettingType::Path:
      if ((config.*spec.text).empty()) json.null();
      else json.string(config.*spec.text);
      return;
  }
}

void writeRow(JsonWriter& json, const SettingSpec& spec, const car::EnvironmentLookup& lookup) {
  const car::Config defaults;
  car::Config effective;
  const char* set = lookup(spec.name);
  const std::optional<std::string> problem = set != nullptr ? car::applySetting(spec, set, &effective) : std::nullopt;

  json.beginObject();
  json.key("name").string(spec.name);
  json.key("type").string(car::settingTypeName(spec.type));
  json.key("agreement").string(car::agreementName(spec.agreement));
  json.key("secure").boolean(spec.secure);
  json.key("values").string(car::acceptedValues(spec));
  json.key("default_text").string(car::valueText(spec, defaults));
  json.key("default");
  writeValue(json, spec, defaults);
  if (spec.type == SettingType::Bytes || spec.type == SettingType::Count) {
    json.key("min").number(spec.min).key("max").number(spec.max).key("multiple_of").number(spec.multipleOf);
  }
  if (spec.type == SettingType::Choice) {
    json.key("choices").beginArray();
    for (std::uint64_t value = 0; value < spec.choices; ++value) json.string(spec.choiceName(value));
    json.endArray();
  }
  json.key("help").string(spec.help);
  json.key("set");
  if (set != nullptr) json.string(set);
  else json.null();
  json.key("value");
  writeValue(json, spec, effective);
  json.key("problem");
  if (problem) json.string(*problem);
  else json.null();
  json.endObject();
}

}  // namespace

void writeSettings(JsonWriter& json, const car::EnvironmentLookup& lookup, char** environment) {
  json.beginObject();
  json.key("settings").beginArray();
  for (const SettingSpec& spec : car::settingsTable()) writeRow(json, spec, lookup);
  json.endArray();
  json.key("unknown").beginArray();
  for (char** entry = environment; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string pair = *entry;
    const std::string name = pair.substr(0, pair.find('='));
    if (name.rfind("NCCL_CAR_", 0) == 0 && car::findSetting(name.c_str()) == nullptr) json.string(name);
  }
  json.endArray();
  json.endObject();
}

}  // namespace carquery
