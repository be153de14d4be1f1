#include "config.h"

#include <cstdlib>

#include "settings_table.h"

namespace car {

const char* forcedAlgorithmName(std::optional<Algorithm> algorithm) {
  return algorithm ? algorithmName(*algorithm) : "auto";
}

const char* processEnvironment(const char* name) {
  const SettingSpec* spec = findSetting(name);
  return spec != nullptr && spec->secure ? secure_getenv(name) : std::getenv(name);
}

Config parseConfig(const EnvironmentLookup& lookup, std::vector<std::string>* problems) {
  Config config;
  for (const SettingSpec& spec : settingsTable()) {
    const char* text = lookup(spec.name);
    if (text == nullptr) continue;
    std::optional<std::string> problem = applySetting(spec, text, &config);
    if (problem && problems != nullptr) problems->push_back(std::move(*problem));
  }
  return config;
}

SharedSettings sharedSettingsOf(const Config& config) {
  SharedSettings settings{};
  for (const SettingSpec& spec : settingsTable()) {
    if (spec.shared) spec.shared.write(settings, spec.field.read(config));
  }
  return settings;
}

const char* firstDifferingVariable(const SharedSettings& a, const SharedSettings& b) {
  for (const SettingSpec& spec : settingsTable()) {
    if (spec.shared && spec.shared.read(a) != spec.shared.read(b)) return spec.name;
  }
  return nullptr;
}

}  // namespace car
