// The rows. Each says everything about one variable; a new variable is one new row (and a
// Config field, and a README.md row, which tests/cli/test_settings_docs.py compares).
#include "settings_table.h"

#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "../kernels/rank_signal.h"

namespace car {
namespace {

// The name of the value the field holds once `value` is written to it.
const char* algorithmChoice(std::uint64_t value) {
  Config config;
  MemberAccess<&Config::algorithm>::write(config, value);
  return forcedAlgorithmName(config.algorithm);
}
const char* logLevelChoice(std::uint64_t value) { return logLevelName(static_cast<LogLevel>(value)); }

SettingSpec row(const char* name, SettingType type, Agreement agreement, std::string help) {
  SettingSpec spec;
  spec.name = name;
  spec.type = type;
  spec.agreement = agreement;
  spec.help = std::move(help);
  return spec;
}

SettingSpec flag(const char* name, NumberField<Config> field, Agreement agreement, std::string help) {
  SettingSpec spec = row(name, SettingType::Flag, agreement, std::move(help));
  spec.field = field;
  return spec;
}

SettingSpec choice(const char* name, NumberField<Config> field, int choices, const char* (*choiceName)(std::uint64_t),
                   Agreement agreement, std::string help) {
  SettingSpec spec = row(name, SettingType::Choice, agreement, std::move(help));
  spec.field = field;
  spec.choices = static_cast<std::uint64_t>(choices);
  spec.choiceName = choiceName;
  return spec;
}

SettingSpec number(const char* name, SettingType type, NumberField<Config> field, std::uint64_t min, std::uint64_t max,
                   std::uint64_t multipleOf, Agreement agreement, std::string help) {
  SettingSpec spec = row(name, type, agreement, std::move(help));
  spec.field = field;
  spec.min = min;
  spec.max = max;
  spec.multipleOf = multipleOf;
  return spec;
}

// Paths are loaded or written by the library: read only outside setuid programs.
SettingSpec path(const char* name, std::string Config::*text, std::string help) {
  SettingSpec spec = row(name, SettingType::Path, Agreement::PerRank, std::move(help));
  spec.text = text;
  spec.secure = true;
  return spec;
}

// The choice table's path, which may differ between ranks, and its digest, which may not: the
// row carries the digest that loading the table sets.
SettingSpec tablePath() {
  SettingSpec spec = path("NCCL_CAR_TABLE", &Config::tablePath,
                          "the choice table nccl-car tune wrote; unset: the one for this machine in "
                          "~/.cache/nccl-car (XDG_CACHE_HOME); builtin: the built-in rule; ranks must follow the "
                          "same table");
  spec.agreement = Agreement::Checked;
  spec.field = numberField<&Config::tableDigest>();
  return spec;
}

SettingSpec carriedIn(SettingSpec spec, NumberField<SharedSettings> shared) {
  spec.shared = shared;
  return spec;
}

}  // namespace

const std::vector<SettingSpec>& settingsTable() {
  static const std::vector<SettingSpec> table = {
      // Carried although it can never differ there: a disabled rank sends no record at all.
      carriedIn(flag("NCCL_CAR_DISABLE", numberField<&Config::disable>(), Agreement::Unchecked,
                     "pure pass-through: every call goes to NCCL; set it on every rank or on none"),
                numberField<&SharedSettings::disable>()),
      carriedIn(choice("NCCL_CAR_ALGO", numberField<&Config::algorithm>(), 1 + kAllReduceAlgorithmCount, &algorithmChoice,
                       Agreement::Checked, "kernel for every all-reduce taken; auto follows the built-in rule; cannot make a "
                       "communicator eligible"),
                numberField<&SharedSettings::algorithm>()),
      carriedIn(number("NCCL_CAR_MAX_BYTES", SettingType::Bytes, numberField<&Config::maxBytes>(), kPackBytes,
                       kLargestMaxBytes, kPackBytes, Agreement::Checked,
                       "largest all-reduce taken, inclusive; where a call can reach a pull kernel, each rank "
                       "allocates 2x this per communicator"),
                numberField<&SharedSettings::maxBytes>()),
      carriedIn(number("NCCL_CAR_ALLGATHER_MAX_BYTES", SettingType::Bytes, numberField<&Config::allGatherMaxBytes>(),
                       0, kLargestMaxBytes, 1, Agreement::Checked,
                       "largest all-gather taken (its output: every rank's part), inclusive; 0: every all-gather "
                       "goes to NCCL; the default is an estimate, not yet measured on NVLink"),
                numberField<&SharedSettings::allGatherMaxBytes>()),
      carriedIn(number("NCCL_CAR_REDUCESCATTER_MAX_BYTES", SettingType::Bytes,
                       numberField<&Config::reduceScatterMaxBytes>(), 0, kLargestMaxBytes, 1, Agreement::Checked,
                       "largest reduce-scatter taken (its input: every rank's part), inclusive; 0: every "
                       "reduce-scatter goes to NCCL; the default is an estimate, not yet measured on NVLink"),
                numberField<&SharedSettings::reduceScatterMaxBytes>()),
      carriedIn(number("NCCL_CAR_MAX_BLOCKS", SettingType::Count, numberField<&Config::maxBlocks>(), 1,
                       kMaxPushBlocks, 1, Agreement::Checked,
                       fmt::format("CUDA blocks per kernel; the pull kernels (1stage, 2stage) use at most {}",
                                   kMaxBlocks)),
                numberField<&SharedSettings::maxBlocks>()),
      carriedIn(number("NCCL_CAR_PUSH_MAX_BYTES", SettingType::Bytes, numberField<&Config::pushMaxBytes>(), 0,
                       kLargestMaxBytes, kPackBytes, Agreement::Checked,
                       "largest all-reduce the push kernels (1shot, 2shot) take; sizes their receive areas, "
                       "about 6x this per rank and communicator; 0 switches them off"),
                numberField<&SharedSettings::pushMaxBytes>()),
      carriedIn(number("NCCL_CAR_SYMMETRIC_NCCL_BYTES", SettingType::Bytes, numberField<&Config::symmetricNcclBytes>(),
                       0, kLargestMaxBytes, 1, Agreement::Checked,
                       "all-reduces up to this size with both buffers in NCCL symmetric windows go to NCCL's "
                       "symmetric kernels; 0: never (measured slower than ours: docs/benchmarks.md)"),
                numberField<&SharedSettings::symmetricNcclBytes>()),
      carriedIn(flag("NCCL_CAR_DETERMINISTIC", numberField<&Config::deterministic>(), Agreement::Checked,
                     "rely on batch invariance: every call taken gives each element the bits of its inputs "
                     "alone, whatever the size, kernel or grid (every kernel does); keeps fp64 and "
                     "symmetric-window calls ours; a WARN per communicator and reason for calls that go to "
                     "NCCL, which promises no such thing"),
                numberField<&SharedSettings::deterministic>()),
      number("NCCL_CAR_GPU_MEMORY_BYTES", SettingType::Bytes, numberField<&Config::gpuMemoryBytes>(), 0,
             std::uint64_t{1} << 50, 1, Agreement::PerRank,
             "most GPU memory the buffer blocks of one process may hold on one GPU (each taken communicator's "
             "setup line says what it holds); a communicator whose block would not fit on some rank goes to "
             "NCCL on every rank; 0: no bound"),
      number("NCCL_CAR_SETUP_TIMEOUT_MS", SettingType::Count, numberField<&Config::setupTimeoutMs>(), 1,
             kLongestSetupTimeoutMs, 1, Agreement::PerRank,
             "milliseconds a communicator's set-up may take, from its exchange to the ranks' agreement on the "
             "first call ours take; a blocking creation waits at most this long; past it the communicator goes "
             "to NCCL, with a WARN"),
      flag("NCCL_CAR_PDL", numberField<&Config::pdl>(), Agreement::PerRank,
           "programmatic dependent launch on sm_90 and newer"),
      number("NCCL_CAR_COPY_IN_KERNEL_BYTES", SettingType::Bytes, numberField<&Config::copyInKernelBytes>(), 0,
             kLargestMaxBytes, 1, Agreement::PerRank,
             "eager pull calls up to this size are one launch, the kernel copying the input itself; 0: always "
             "a separate copy"),
      choice("NCCL_CAR_DEBUG", numberField<&Config::logLevel>(), kLogLevelCount, &logLevelChoice,
             Agreement::PerRank, "log level; TRACE adds one line per call our kernels take"),
      path("NCCL_CAR_DEBUG_FILE", &Config::debugFile,
           "file for the log lines instead of stderr; %h is the host name, %p the process id"),
      carriedIn(tablePath(), numberField<&SharedSettings::tableDigest>()),
      path("NCCL_CAR_NCCL_LIB", &Config::ncclLibrary,
           "the real libnccl.so.2, when it is neither the next library nor already loaded (under LD_AUDIT: "
           "instead of the one the program asked for)"),
  };
  return table;
}

const SettingSpec* findSetting(const char* name) {
  for (const SettingSpec& spec : settingsTable()) {
    if (std::strcmp(spec.name, name) == 0) return &spec;
  }
  return nullptr;
}

}  // namespace car
