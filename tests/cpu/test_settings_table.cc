// The settings table itself: every row's default, range and choices behave as the row says,
// and every byte of the cross-rank fingerprint belongs to one row.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <set>
#include <string>

#include "log_file.h"
#include "settings_table.h"

using namespace car;

namespace {

std::optional<std::string> apply(const SettingSpec& spec, const std::string& text, Config* config) {
  return applySetting(spec, text.c_str(), config);
}

bool isNumber(const SettingSpec& spec) { return spec.type == SettingType::Bytes || spec.type == SettingType::Count; }

}  // namespace

TEST_CASE("settings table: names are unique NCCL_CAR_ variables with one line of help", "[settings]") {
  std::set<std::string> names;
  for (const SettingSpec& spec : settingsTable()) {
    CAPTURE(spec.name);
    CHECK(std::string(spec.name).rfind("NCCL_CAR_", 0) == 0);
    CHECK(names.insert(spec.name).second);
    CHECK_FALSE(spec.help.empty());
    CHECK(spec.help.find('\n') == std::string::npos);
    CHECK(spec.help.find('|') == std::string::npos);  // it is a cell of docs/settings.md's table
    CHECK(findSetting(spec.name) == &spec);
  }
  CHECK(findSetting("NCCL_CAR_MAXBYTES") == nullptr);
  CHECK(names.size() == 17);
}

TEST_CASE("settings table: every default is a value its own row accepts", "[settings]") {
  for (const SettingSpec& spec : settingsTable()) {
    if (spec.type == SettingType::Path) continue;  // unset is the default; "none" is no path
    CAPTURE(spec.name);
    Config config;
    config.maxBytes = 4096;  // so that a write of the default is seen
    const std::string text = valueText(spec, Config{});
    CHECK_FALSE(apply(spec, text, &config));
    CHECK(valueText(spec, config) == text);
  }
}

TEST_CASE("settings table: numbers are taken at both ends of their range and refused outside", "[settings]") {
  for (const SettingSpec& spec : settingsTable()) {
    if (!isNumber(spec)) continue;
    CAPTURE(spec.name);
    Config config;
    CHECK_FALSE(apply(spec, std::to_string(spec.min), &config));
    CHECK(spec.field.read(config) == spec.min);
    CHECK_FALSE(apply(spec, std::to_string(spec.max), &config));
    CHECK(spec.field.read(config) == spec.max);
    const Config untouched;
    config = untouched;
    CHECK(apply(spec, std::to_string(spec.max + spec.multipleOf), &config));
    if (spec.min > 0) CHECK(apply(spec, std::to_string(spec.min - 1), &config));
    if (spec.multipleOf > 1) CHECK(apply(spec, std::to_string(spec.min + spec.multipleOf + 1), &config));
    CHECK(valueText(spec, config) == valueText(spec, untouched));
    CHECK(acceptedValues(spec).find(std::to_string(spec.max)) != std::string::npos);
  }
}

TEST_CASE("settings table: choices are matched in any case and name what the code calls them", "[settings]") {
  for (const SettingSpec& spec : settingsTable()) {
    if (spec.type != SettingType::Choice) continue;
    CAPTURE(spec.name);
    for (std::uint64_t value = 0; value < spec.choices; ++value) {
      std::string upper = spec.choiceName(value);
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      Config config;
      CHECK_FALSE(apply(spec, upper, &config));
      CHECK(spec.field.read(config) == value);
      CHECK(acceptedValues(spec).find(spec.choiceName(value)) != std::string::npos);
    }
  }
  // NCCL_CAR_ALGO: auto, then every all-reduce row of the algorithm table by its own name,
  // parsed back to that row by the setting's parser and carried so in the fingerprint; the
  // other collectives' kernels are no choice of it.
  const SettingSpec& algo = *findSetting("NCCL_CAR_ALGO");
  REQUIRE(algo.choices == static_cast<std::uint64_t>(1 + kAllReduceAlgorithmCount));
  CHECK(std::string(algo.choiceName(0)) == "auto");
  for (const AlgorithmSpec& row : kAlgorithms) {
    CAPTURE(row.name);
    if (!serves(row.algorithm, Collective::AllReduce)) {
      Config config;
      CHECK(apply(algo, row.name, &config));  // a problem: the default kept
      CHECK_FALSE(config.algorithm.has_value());
      continue;
    }
    Config config;
    CHECK_FALSE(apply(algo, row.name, &config));
    CHECK(config.algorithm == row.algorithm);
    CHECK(std::string(forcedAlgorithmName(config.algorithm)) == row.name);
    CHECK(std::string(valueText(algo, config)) == row.name);
    Config other = config;
    other.algorithm.reset();
    CHECK(sharedSettingsOf(config).algorithm != sharedSettingsOf(other).algorithm);
  }
  Config automatic;
  automatic.algorithm = Algorithm::TwoStage;
  CHECK_FALSE(apply(algo, "auto", &automatic));
  CHECK_FALSE(automatic.algorithm.has_value());
  CHECK(std::string(findSetting("NCCL_CAR_DEBUG")->choiceName(2)) == "TRACE");
}

TEST_CASE("settings table: every byte of SharedSettings is some row's", "[settings]") {
  SharedSettings settings;
  std::memset(&settings, 0xff, sizeof(settings));
  int carried = 0;
  for (const SettingSpec& spec : settingsTable()) {
    if (!spec.shared) continue;
    spec.shared.write(settings, 0);
    ++carried;
  }
  CHECK(carried == 10);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&settings);
  for (std::size_t i = 0; i < sizeof(SharedSettings); ++i) {
    CAPTURE(i);
    CHECK(bytes[i] == 0);
  }
}

TEST_CASE("settings table: the fingerprint names exactly the carried variable that differs", "[settings]") {
  for (const SettingSpec& spec : settingsTable()) {
    if (spec.type == SettingType::Path) continue;
    CAPTURE(spec.name);
    Config other;
    // Another accepted value: the range's far end, or the other flag or choice.
    const std::uint64_t current = spec.field.read(other);
    const std::uint64_t different = isNumber(spec) ? (current == spec.max ? spec.min : spec.max)
                                                   : (current + 1) % (spec.type == SettingType::Flag ? 2 : spec.choices);
    spec.field.write(other, different);
    const char* differing = firstDifferingVariable(sharedSettingsOf(Config{}), sharedSettingsOf(other));
    if (spec.shared) {
      REQUIRE(differing != nullptr);
      CHECK(std::string(differing) == spec.name);
      CHECK(spec.agreement != Agreement::PerRank);
    } else {
      CHECK(differing == nullptr);
      CHECK(spec.agreement == Agreement::PerRank);
    }
  }
}

TEST_CASE("settings table: paths are read with secure_getenv, the rest with getenv", "[settings]") {
  for (const SettingSpec& spec : settingsTable()) {
    CAPTURE(spec.name);
    CHECK(spec.secure == (spec.type == SettingType::Path));
  }
  ::setenv("NCCL_CAR_DEBUG_FILE", "/tmp/x.log", 1);
  ::setenv("NCCL_CAR_ALGO", "2stage", 1);
  // Not a setuid program: both are seen.
  CHECK(std::string(processEnvironment("NCCL_CAR_DEBUG_FILE")) == "/tmp/x.log");
  CHECK(std::string(processEnvironment("NCCL_CAR_ALGO")) == "2stage");
  ::unsetenv("NCCL_CAR_DEBUG_FILE");
  ::unsetenv("NCCL_CAR_ALGO");
  CHECK(processEnvironment("NCCL_CAR_ALGO") == nullptr);
}

TEST_CASE("log file names: %h is the host, %p the pid, %% a percent sign", "[settings][log]") {
  CHECK(expandLogFileName("/tmp/car.%h.%p.log", "node7", 4711) == "/tmp/car.node7.4711.log");
  CHECK(expandLogFileName("plain.log", "node7", 1) == "plain.log");
  CHECK(expandLogFileName("%%h-%p%%", "node7", 12) == "%h-12%");
  CHECK(expandLogFileName("%x%", "node7", 12) == "%x%");
  CHECK(expandLogFileName("%h%h", "a", 1) == "aa");
}
