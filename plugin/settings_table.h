// The one table of NCCL_CAR_* settings: name, type, range, whether ranks must agree, one line
// of help, and where the value lives in Config and in the cross-rank fingerprint. Parsing
// (config.cc), the WARN texts, the fingerprint (SharedSettings) and the query program's dump
// (nccl_car_query, tools/query/) all walk this table; nothing else lists the variables. Defaults are
// Config's member initialisers, read through the same field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "config.h"

namespace car {

enum class SettingType { Flag, Choice, Bytes, Count, Path };

// What ranks of one communicator must have in common.
enum class Agreement {
  Checked,    // carried in SharedSettings: a difference makes the communicator forward, with a WARN
  Unchecked,  // must agree, but a rank that differs never reaches the comparison
  PerRank,    // may differ between ranks
};

// One field of a struct seen as a 64-bit number (bools as 0/1, enums as their value, an
// optional enum as 0 for none or 1 + its value: NCCL_CAR_ALGO's auto, then each kernel), so
// one row can describe a bool, an enum or a size alike.
template <typename Owner>
struct NumberField {
  std::uint64_t (*read)(const Owner&) = nullptr;
  void (*write)(Owner&, std::uint64_t) = nullptr;
  explicit operator bool() const { return read != nullptr; }
};

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <auto kMember>
struct MemberAccess;

template <typename Owner, typename Value, Value Owner::*kMember>
struct MemberAccess<kMember> {
  using OwnerType = Owner;
  static std::uint64_t read(const Owner& owner) {
    if constexpr (IsOptional<Value>::value) {
      const Value& value = owner.*kMember;
      return value ? 1 + static_cast<std::uint64_t>(*value) : 0;
    } else {
      return static_cast<std::uint64_t>(owner.*kMember);
    }
  }
  static void write(Owner& owner, std::uint64_t value) {
    if constexpr (IsOptional<Value>::value) {
      owner.*kMember = value == 0 ? Value() : Value(static_cast<typename Value::value_type>(value - 1));
    } else {
      owner.*kMember = static_cast<Value>(value);
    }
  }
};

template <auto kMember>
NumberField<typename MemberAccess<kMember>::OwnerType> numberField() {
  return {&MemberAccess<kMember>::read, &MemberAccess<kMember>::write};
}

struct SettingSpec {
  const char* name = nullptr;
  SettingType type = SettingType::Flag;
  Agreement agreement = Agreement::PerRank;
  std::string help;                       // one line; docs/settings.md's table shows it as is
  NumberField<Config> field;              // every type but Path
  std::string Config::*text = nullptr;    // Path
  NumberField<SharedSettings> shared;     // its field in the fingerprint; empty when not carried
  std::uint64_t min = 0;                  // Bytes, Count: inclusive range
  std::uint64_t max = 0;
  std::uint64_t multipleOf = 1;
  std::uint64_t choices = 0;              // Choice: values 0 .. choices - 1
  const char* (*choiceName)(std::uint64_t) = nullptr;
  bool secure = false;                    // read with secure_getenv: ignored in setuid programs
};

// Every setting, in the order they are parsed and compared.
const std::vector<SettingSpec>& settingsTable();

// The row for `name`, or nullptr.
const SettingSpec* findSetting(const char* name);

// Parses `text` as `spec` says and stores it into *config. Returns the WARN sentence (naming
// the variable, what it expects and the default kept) when the value is refused.
std::optional<std::string> applySetting(const SettingSpec& spec, const char* text, Config* config);

// What a value may be, e.g. "1 to 128": used in the WARN text, the dump and the docs.
std::string acceptedValues(const SettingSpec& spec);

// The value `config` holds for `spec`, written as the user would set it ("none" for an unset
// path). With Config{} this is the default.
std::string valueText(const SettingSpec& spec, const Config& config);

const char* settingTypeName(SettingType type);
const char* agreementName(Agreement agreement);

}  // namespace car
