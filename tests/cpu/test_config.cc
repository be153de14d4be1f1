// NCCL_CAR_* parsing: good values are taken, bad ones are reported by name and the default
// is kept; nothing half-parsed slips through.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "config.h"

using namespace car;

namespace {

struct FakeEnvironment {
  std::map<std::string, std::string> values;
  EnvironmentLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = values.find(name);
      return it == values.end() ? nullptr : it->second.c_str();
    };
  }
};

Config parse(std::map<std::string, std::string> values, std::vector<std::string>* problems) {
  FakeEnvironment env{std::move(values)};
  return parseConfig(env.lookup(), problems);
}

}  // namespace

TEST_CASE("defaults with nothing set", "[config]") {
  std::vector<std::string> problems;
  const Config config = parse({}, &problems);
  CHECK(problems.empty());
  CHECK_FALSE(config.disable);
  CHECK(config.algorithm == std::nullopt);
  CHECK(config.maxBytes == 8u * 1024 * 1024);
  CHECK(config.maxBlocks == kMaxPushBlocks);
  CHECK(config.pushMaxBytes == 8u * 1024 * 1024);
  CHECK(config.pdl);
  CHECK(config.copyInKernelBytes == 512u * 1024);
  CHECK(config.logLevel == LogLevel::Warn);
  CHECK(config.ncclLibrary.empty());
  CHECK(config.debugFile.empty());
}

TEST_CASE("good values are taken", "[config]") {
  std::vector<std::string> problems;
  const Config config = parse({{"NCCL_CAR_DISABLE", "1"},
                               {"NCCL_CAR_ALGO", "2stage"},
                               {"NCCL_CAR_MAX_BYTES", "1048576"},
                               {"NCCL_CAR_MAX_BLOCKS", "16"},
                               {"NCCL_CAR_PUSH_MAX_BYTES", "0"},
                               {"NCCL_CAR_PDL", "off"},
                               {"NCCL_CAR_COPY_IN_KERNEL_BYTES", "0"},
                               {"NCCL_CAR_DEBUG", "info"},
                               {"NCCL_CAR_NCCL_LIB", "/opt/nccl/lib/libnccl.so.2"},
                               {"NCCL_CAR_DEBUG_FILE", "/tmp/car.%h.%p.log"}},
                              &problems);
  CHECK(problems.empty());
  CHECK(config.disable);
  CHECK(config.algorithm == Algorithm::TwoStage);
  CHECK(config.maxBytes == 1048576);
  CHECK(config.maxBlocks == 16);
  CHECK(config.pushMaxBytes == 0);
  CHECK_FALSE(config.pdl);
  CHECK(config.copyInKernelBytes == 0);
  CHECK(config.logLevel == LogLevel::Info);
  CHECK(config.ncclLibrary == "/opt/nccl/lib/libnccl.so.2");
  CHECK(config.debugFile == "/tmp/car.%h.%p.log");
}

TEST_CASE("bad values warn by name and keep the default", "[config]") {
  struct Row {
    const char* name;
    const char* value;
  };
  const Row rows[] = {
      {"NCCL_CAR_DISABLE", "2"},          {"NCCL_CAR_DISABLE", ""},
      {"NCCL_CAR_ALGO", "3stage"},        {"NCCL_CAR_ALGO", ""},
      {"NCCL_CAR_MAX_BYTES", "abc"},      {"NCCL_CAR_MAX_BYTES", "12k"},
      {"NCCL_CAR_MAX_BYTES", "-16"},      {"NCCL_CAR_MAX_BYTES", "+16"},
      {"NCCL_CAR_MAX_BYTES", " 16"},      {"NCCL_CAR_MAX_BYTES", "17"},
      {"NCCL_CAR_MAX_BYTES", "0"},        {"NCCL_CAR_MAX_BYTES", "99999999999999999999999"},
      {"NCCL_CAR_MAX_BYTES", "2147483648"},
      {"NCCL_CAR_MAX_BLOCKS", "0"},       {"NCCL_CAR_MAX_BLOCKS", "257"},
      {"NCCL_CAR_PUSH_MAX_BYTES", "17"},  {"NCCL_CAR_PUSH_MAX_BYTES", "2147483648"},
      {"NCCL_CAR_PUSH_MAX_BYTES", "8M"},  {"NCCL_CAR_PDL", "2"},
      {"NCCL_CAR_ALGO", "push"},
      {"NCCL_CAR_MAX_BLOCKS", "4.5"},     {"NCCL_CAR_MAX_BLOCKS", "18446744073709551617"},
      {"NCCL_CAR_COPY_IN_KERNEL_BYTES", "-1"},
      {"NCCL_CAR_COPY_IN_KERNEL_BYTES", "1M"},
      {"NCCL_CAR_COPY_IN_KERNEL_BYTES", "1073741825"},
      {"NCCL_CAR_DEBUG", "VERBOSE"},      {"NCCL_CAR_NCCL_LIB", ""},
      {"NCCL_CAR_DEBUG_FILE", ""},
  };
  const Config defaults;
  for (const Row& row : rows) {
    CAPTURE(row.name, row.value);
    std::vector<std::string> problems;
    const Config config = parse({{row.name, row.value}}, &problems);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].find(row.name) != std::string::npos);
    CHECK(problems[0].find("using default") != std::string::npos);
    CHECK(config.disable == defaults.disable);
    CHECK(config.algorithm == defaults.algorithm);
    CHECK(config.maxBytes == defaults.maxBytes);
    CHECK(config.maxBlocks == defaults.maxBlocks);
    CHECK(config.pushMaxBytes == defaults.pushMaxBytes);
    CHECK(config.pdl == defaults.pdl);
    CHECK(config.copyInKernelBytes == defaults.copyInKernelBytes);
    CHECK(config.logLevel == defaults.logLevel);
    CHECK(config.debugFile == defaults.debugFile);
  }
}

TEST_CASE("a bad value's WARN says what the variable accepts and the default kept", "[config]") {
  std::vector<std::string> problems;
  parse({{"NCCL_CAR_MAX_BYTES", "8M"}}, &problems);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "invalid value '8M' for NCCL_CAR_MAX_BYTES (expected 16 to 1073741824 bytes, a multiple of 16), "
        "using default 8388608");
  problems.clear();
  parse({{"NCCL_CAR_ALGO", "fast"}}, &problems);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "invalid value 'fast' for NCCL_CAR_ALGO (expected auto, 1stage, 2stage, 1shot, 2shot (any case)), "
        "using default auto");
}

TEST_CASE("strict number parsing", "[config]") {
  std::uint64_t value = 0;
  CHECK(parseUnsigned("0", &value));
  CHECK(value == 0);
  CHECK(parseUnsigned("18446744073709551615", &value));
  CHECK(value == 18446744073709551615ull);
  CHECK_FALSE(parseUnsigned("18446744073709551616", &value));
  CHECK_FALSE(parseUnsigned("", &value));
  CHECK_FALSE(parseUnsigned("1e3", &value));
  CHECK_FALSE(parseUnsigned("0x10", &value));
  CHECK_FALSE(parseUnsigned("10 ", &value));
  CHECK_FALSE(parseUnsigned("-1", &value));
}

TEST_CASE("settings that must agree across ranks name the variable that differs", "[config]") {
  Config a, b;
  CHECK(firstDifferingVariable(sharedSettingsOf(a), sharedSettingsOf(b)) == nullptr);
  b.maxBytes = 4096;
  CHECK(std::string(firstDifferingVariable(sharedSettingsOf(a), sharedSettingsOf(b))) == "NCCL_CAR_MAX_BYTES");
  b = a;
  b.algorithm = Algorithm::OneStage;
  CHECK(std::string(firstDifferingVariable(sharedSettingsOf(a), sharedSettingsOf(b))) == "NCCL_CAR_ALGO");
  b = a;
  b.pushMaxBytes = 0;
  CHECK(std::string(firstDifferingVariable(sharedSettingsOf(a), sharedSettingsOf(b))) == "NCCL_CAR_PUSH_MAX_BYTES");
  b = a;
  b.maxBlocks = 8;
  CHECK(std::string(firstDifferingVariable(sharedSettingsOf(a), sharedSettingsOf(b))) == "NCCL_CAR_MAX_BLOCKS");
  b = a;
  b.disable = true;
  CHECK(std::string(firstDifferingVariable(sharedSettingsOf(a), sharedSettingsOf(b))) == "NCCL_CAR_DISABLE");
  // The log level is local: ranks may differ.
  b = a;
  b.logLevel = LogLevel::Trace;
  CHECK(firstDifferingVariable(sharedSettingsOf(a), sharedSettingsOf(b)) == nullptr);
}
