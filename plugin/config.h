// The settings the library runs with: one field per NCCL_CAR_* variable, read once, validated
// as the table in settings_table.cc describes. A bad value is reported and the default kept;
// it never stops the program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../kernels/all_reduce.h"
#include "log.h"

namespace car {

class ChoiceTable;

constexpr std::size_t kDefaultMaxBytes = std::size_t{8} << 20;
// Upper bound for NCCL_CAR_MAX_BYTES: each rank allocates 2x this on its GPU per communicator.
constexpr std::size_t kLargestMaxBytes = std::size_t{1} << 30;
// Eager calls up to this size copy their input into staging inside the kernel: one launch
// instead of two, which is what small eager calls pay for (docs/benchmarks.md).
constexpr std::size_t kDefaultCopyInKernelBytes = std::size_t{512} << 10;
// Largest all-reduce the push kernels take; sizes their three receive areas, each about
// 2x this (docs/design.md, "The buffer block"). 0 switches them off.
constexpr std::size_t kDefaultPushMaxBytes = std::size_t{8} << 20;
// Largest all-gather (its output) and reduce-scatter (its input) taken by default. Estimates,
// not measurements on NVLink (docs/benchmarks.md, "All-gather and reduce-scatter"): sizes
// where our all-reduce of the same bytes on the wire was under half of NCCL's best.
constexpr std::size_t kDefaultAllGatherMaxBytes = std::size_t{1} << 20;
constexpr std::size_t kDefaultReduceScatterMaxBytes = std::size_t{1} << 20;
// How long a communicator's set-up may take (docs/design.md, "The set-up"): long enough for a
// rank that is merely slow to come, short enough that a dead peer leaves a creating call
// well inside PyTorch's collective timeout (10 minutes).
constexpr std::uint64_t kDefaultSetupTimeoutMs = 60000;
constexpr std::uint64_t kLongestSetupTimeoutMs = std::uint64_t{24} * 3600 * 1000;

struct Config {
  bool disable = false;                                 // NCCL_CAR_DISABLE
  std::optional<Algorithm> algorithm;                   // NCCL_CAR_ALGO: the all-reduce kernel forced; nullopt: auto
  std::size_t maxBytes = kDefaultMaxBytes;              // NCCL_CAR_MAX_BYTES (inclusive)
  // NCCL_CAR_ALLGATHER_MAX_BYTES, NCCL_CAR_REDUCESCATTER_MAX_BYTES (inclusive, the whole
  // message: every rank's part); 0: that collective always goes to NCCL.
  std::size_t allGatherMaxBytes = kDefaultAllGatherMaxBytes;
  std::size_t reduceScatterMaxBytes = kDefaultReduceScatterMaxBytes;
  // NCCL_CAR_MAX_BLOCKS, 1..kMaxPushBlocks; the pull kernels use at most kMaxBlocks of it.
  int maxBlocks = kMaxPushBlocks;
  std::size_t pushMaxBytes = kDefaultPushMaxBytes;       // NCCL_CAR_PUSH_MAX_BYTES (inclusive)
  // NCCL_CAR_PDL: programmatic dependent launch on sm_90 and newer. Per rank: it changes
  // when a kernel may be scheduled, not what it does.
  bool pdl = true;
  // NCCL_CAR_COPY_IN_KERNEL_BYTES; 0 = always a separate copy. Per rank: ranks that copy in
  // the kernel and ranks that do not interoperate, so it is not a shared setting.
  std::size_t copyInKernelBytes = kDefaultCopyInKernelBytes;
  // NCCL_CAR_SYMMETRIC_NCCL_BYTES: all-reduces up to this size whose buffers both lie in NCCL
  // symmetric windows go to NCCL's symmetric kernels. 0 (never) by default: the figures behind
  // the defaults have them slower than ours at every size (docs/benchmarks.md, "Against NCCL's
  // best: 2 H200s, bf16 sum", the NCCL -R 2 columns).
  std::size_t symmetricNcclBytes = 0;
  // NCCL_CAR_DETERMINISTIC: the user relies on every element's result depending on its inputs
  // alone (docs/user-guide.md, "Bitwise the same for every size"). Every kernel keeps that;
  // the setting keeps ours the calls NCCL would take for speed alone and says where the
  // promise ends (calls that go to NCCL).
  bool deterministic = false;
  // NCCL_CAR_GPU_MEMORY_BYTES: the most GPU memory this process's buffer blocks may hold on one
  // GPU; 0: no bound. Per rank: the ranks agree through the handshake, where a rank without
  // room for one more block makes that communicator NCCL's on every rank.
  std::size_t gpuMemoryBytes = 0;
  // NCCL_CAR_SETUP_TIMEOUT_MS: a set-up not done this long after it started gives up and its
  // communicator forwards everything; a blocking creation waits at most this long. Per rank:
  // a rank that gives up tells the others (shim/handshake/setup_board.h).
  std::uint64_t setupTimeoutMs = kDefaultSetupTimeoutMs;
  LogLevel logLevel = LogLevel::Warn;                   // NCCL_CAR_DEBUG
  std::string ncclLibrary;                              // NCCL_CAR_NCCL_LIB
  std::string debugFile;  // NCCL_CAR_DEBUG_FILE, unexpanded (%h, %p); empty: stderr
  // NCCL_CAR_TABLE: the choice table `nccl-car tune` wrote (plugin/choice_table.h); empty: the
  // one for this machine's fingerprint in the cache folder, if there is one; "builtin": no table. The table is
  // loaded at the first set-up (shim/exports/shim_config.h), when the machine can be asked;
  // ranks compare its digest (0: none, the built-in rule), not the path.
  std::string tablePath;
  std::uint64_t tableDigest = 0;
  std::shared_ptr<const ChoiceTable> table;
  // Not a setting (no row in the table): NCCL_CAR_TEST_FAULT=launch-error
  // (shim/exports/fault_injection.h). Every call our kernels take reports
  // cudaErrorLaunchFailure once its kernel is queued, as a failed event record would.
  bool testLaunchFailure = false;
};

// Returns the value of an environment variable or nullptr; injectable for tests.
using EnvironmentLookup = std::function<const char*(const char*)>;

// This process's environment as the library reads it: secure_getenv for the settings the
// table marks secure (paths we load or write), getenv for the others.
const char* processEnvironment(const char* name);

// Parses every NCCL_CAR_* variable. Each problem (bad value, default kept) is appended to
// `problems` as one human-readable sentence naming the variable.
Config parseConfig(const EnvironmentLookup& lookup, std::vector<std::string>* problems);

// The settings that must be equal on every rank of a communicator, or the ranks would
// disagree on which calls are ours and hang. Plain data: it travels in the handshake.
struct SharedSettings {
  std::uint64_t maxBytes;
  std::uint64_t pushMaxBytes;
  std::int32_t maxBlocks;
  std::int32_t algorithm;  // 0: auto; 1 + the forced Algorithm
  // Once one 32-bit flag: a record of a build without `deterministic` reads as 0 there (the
  // high half, little-endian), which is what that build does.
  std::int16_t disable;
  std::int16_t deterministic;
  std::int32_t symmetricNcclBytes;  // at most kLargestMaxBytes, which fits
  std::uint64_t allGatherMaxBytes;
  std::uint64_t reduceScatterMaxBytes;
  std::uint64_t tableDigest;
};
static_assert(sizeof(SharedSettings) == 56 && std::is_trivially_copyable_v<SharedSettings> &&
                  std::is_standard_layout_v<SharedSettings>,
              "SharedSettings travels in the handshake record: its size is part of the wire format");

SharedSettings sharedSettingsOf(const Config& config);

// Name of the first variable whose value differs, in the table's order, or nullptr when all
// agree.
const char* firstDifferingVariable(const SharedSettings& a, const SharedSettings& b);

// Strict parsers: the whole string must be the value; no sign, no overflow, no trailing text.
bool parseUnsigned(const char* text, std::uint64_t* value);
bool parseBool(const char* text, bool* value);

// NCCL_CAR_ALGO's value as the user writes it: "auto", or the forced kernel's name.
const char* forcedAlgorithmName(std::optional<Algorithm> algorithm);

}  // namespace car
