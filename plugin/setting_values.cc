// The generic half of the settings table: how each type of setting is parsed, described and
// shown. One WARN shape for all: "invalid value 'X' for NAME (expected ...), using default D".
#include <strings.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "settings_table.h"

namespace car {
namespace {

constexpr const char* kTrueWords[] = {"1", "true", "yes", "on"};
constexpr const char* kFalseWords[] = {"0", "false", "no", "off"};

bool equalsIgnoringCase(const char* a, const char* b) { return strcasecmp(a, b) == 0; }

// Stores a parsed value; false when the text is not one `spec` accepts.
bool store(const SettingSpec& spec, const char* text, Config* config) {
  switch (spec.type) {
    case SettingType::Flag: {
      bool value = false;
      if (!parseBool(text, &value)) return false;
      spec.field.write(*config, value ? 1 : 0);
      return true;
    }
    case SettingType::Choice:
      for (std::uint64_t value = 0; value < spec.choices; ++value) {
        if (!equalsIgnoringCase(text, spec.choiceName(value))) continue;
        spec.field.write(*config, value);
        return true;
      }
      return false;
    case SettingType::Bytes:
    case SettingType::Count: {
      std::uint64_t value = 0;
      if (!parseUnsigned(text, &value) || value < spec.min || value > spec.max || value % spec.multipleOf != 0) {
        return false;
      }
      spec.field.write(*config, value);
      return true;
    }
    case SettingType::Path:
      if (text[0] == '\0') return false;
      config->*spec.text = text;
      return true;
  }
  return false;
}

}  // namespace

bool parseUnsigned(const char* text, std::uint64_t* value) {
  if (text == nullptr || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text, &end, 10);
  if (errno == ERANGE || end == text || *end != '\0') return false;
  *value = parsed;
  return true;
}

bool parseBool(const char* text, bool* value) {
  for (const char* word : kTrueWords) {
    if (equalsIgnoringCase(text, word)) return *value = true, true;
  }
  for (const char* word : kFalseWords) {
    if (equalsIgnoringCase(text, word)) return *value = false, true;
  }
  return false;
}

std::optional<std::string> applySetting(const SettingSpec& spec, const char* text, Config* config) {
  if (store(spec, text, config)) return std::nullopt;
  return fmt::format("invalid value '{}' for {} (expected {}), using default {}", text, spec.name,
                     acceptedValues(spec), valueText(spec, Config{}));
}

std::string acceptedValues(const SettingSpec& spec) {
  switch (spec.type) {
    case SettingType::Flag:
      return fmt::format("{} / {} (any case)", fmt::join(kTrueWords, ", "), fmt::join(kFalseWords, ", "));
    case SettingType::Choice: {
      std::vector<const char*> names;
      for (std::uint64_t value = 0; value < spec.choices; ++value) names.push_back(spec.choiceName(value));
      return fmt::format("{} (any case)", fmt::join(names, ", "));
    }
    case SettingType::Bytes:
    case SettingType::Count: {
      const char* unit = spec.type == SettingType::Bytes ? " bytes" : "";
      if (spec.multipleOf == 1) return fmt::format("{} to {}{}", spec.min, spec.max, unit);
      return fmt::format("{} to {}{}, a multiple of {}", spec.min, spec.max, unit, spec.multipleOf);
    }
    case SettingType::Path:
      return "a non-empty path";
  }
  return "?";
}

std::string valueText(const SettingSpec& spec, const Config& config) {
  switch (spec.type) {
    case SettingType::Flag: return spec.field.read(config) != 0 ? "1" : "0";
    case SettingType::Choice: return spec.choiceName(spec.field.read(config));
    case SettingType::Bytes:
    case SettingType::Count: return std::to_string(spec.field.read(config));
    case SettingType::Path: return (config.*spec.text).empty() ? "none" : config.*spec.text;
  }
  return "?";
}

const char* settingTypeName(SettingType type) {
  switch (type) {
    case SettingType::Flag: return "flag";
    case SettingType::Choice: return "choice";
    case SettingType::Bytes: return "bytes";
    case SettingType::Count: return "count";
    case SettingType::Path: return "path";
  }
  return "?";
}

const char* agreementName(Agreement agreement) {
  switch (agreement) {
    case Agreement::Checked: return "checked";
    case Agreement::Unchecked: return "must match, unchecked";
    case Agreement::PerRank: return "may differ";
  }
  return "?";
}

}  // namespace car
