#include "config.h"

#include <cerrno>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "../kernels/rank_signal.h"

namespace car {
namespace {

std::string invalid(const char* name, const char* value, const std::string& why,
                    const std::string& fallback) {
  return fmt::format("invalid value '{}' for {} ({}), using default {}", value, name, why, fallback);
}

bool equalsIgnoringCase(const char* a, const char* b) { return strcasecmp(a, b) == 0; }

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
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* word : kTrue) {
    if (equalsIgnoringCase(text, word)) return *value = true, true;
  }
  for (const char* word : kFalse) {
    if (equalsIgnoringCase(text, word)) return *value = false, true;
  }
  return false;
}

std::optional<Algorithm> forcedAlgorithm(AlgorithmOverride algorithm) {
  switch (algorithm) {
    case AlgorithmOverride::Auto: return std::nullopt;
    case AlgorithmOverride::OneStage: return Algorithm::OneStage;
    case AlgorithmOverride::TwoStage: return Algorithm::TwoStage;
    case AlgorithmOverride::OneShot: return Algorithm::OneShotPush;
    case AlgorithmOverride::TwoShot: return Algorithm::TwoShotPush;
  }
  return std::nullopt;
}

const char* overrideName(AlgorithmOverride algorithm) {
  const std::optional<Algorithm> forced = forcedAlgorithm(algorithm);
  return forced ? algorithmName(*forced) : "auto";
}

Config parseConfig(const EnvironmentLookup& lookup, std::vector<std::string>* problems) {
  Config config;
  auto report = [problems](std::string sentence) {
    if (problems != nullptr) problems->push_back(std::move(sentence));
  };

  if (const char* text = lookup("NCCL_CAR_DISABLE")) {
    if (!parseBool(text, &config.disable)) {
      report(invalid("NCCL_CAR_DISABLE", text, "expected 0 or 1", "0"));
    }
  }

  if (const char* text = lookup("NCCL_CAR_ALGO")) {
    bool known = false;
    for (AlgorithmOverride candidate : {AlgorithmOverride::Auto, AlgorithmOverride::OneStage, AlgorithmOverride::TwoStage,
                                        AlgorithmOverride::OneShot, AlgorithmOverride::TwoShot}) {
      if (equalsIgnoringCase(text, overrideName(candidate))) {
        config.algorithm = candidate;
        known = true;
      }
    }
    if (!known) report(invalid("NCCL_CAR_ALGO", text, "expected auto, 1shot, 2shot, 1stage or 2stage", "auto"));
  }

  if (const char* text = lookup("NCCL_CAR_MAX_BYTES")) {
    std::uint64_t bytes = 0;
    const std::string fallback = std::to_string(kDefaultMaxBytes);
    if (!parseUnsigned(text, &bytes)) {
      report(invalid("NCCL_CAR_MAX_BYTES", text, "not a whole number of bytes", fallback));
    } else if (bytes < kPackBytes || bytes % kPackBytes != 0 || bytes > kLargestMaxBytes) {
      report(invalid("NCCL_CAR_MAX_BYTES", text,
                     fmt::format("must be a multiple of 16 from 16 to {}", kLargestMaxBytes),
                     fallback));
    } else {
      config.maxBytes = static_cast<std::size_t>(bytes);
    }
  }

  if (const char* text = lookup("NCCL_CAR_MAX_BLOCKS")) {
    std::uint64_t blocks = 0;
    if (!parseUnsigned(text, &blocks) || blocks < 1 || blocks > static_cast<std::uint64_t>(kMaxPushBlocks)) {
      report(invalid("NCCL_CAR_MAX_BLOCKS", text, fmt::format("expected 1 to {}", kMaxPushBlocks),
                     std::to_string(kMaxPushBlocks)));
    } else {
      config.maxBlocks = static_cast<int>(blocks);
    }
  }

  if (const char* text = lookup("NCCL_CAR_PUSH_MAX_BYTES")) {
    std::uint64_t bytes = 0;
    if (!parseUnsigned(text, &bytes) || bytes % kPackBytes != 0 || bytes > kLargestMaxBytes) {
      report(invalid("NCCL_CAR_PUSH_MAX_BYTES", text,
                     fmt::format("must be 0 or a multiple of 16 up to {}", kLargestMaxBytes),
                     std::to_string(kDefaultPushMaxBytes)));
    } else {
      config.pushMaxBytes = static_cast<std::size_t>(bytes);
    }
  }

  if (const char* text = lookup("NCCL_CAR_PDL")) {
    if (!parseBool(text, &config.pdl)) report(invalid("NCCL_CAR_PDL", text, "expected 0 or 1", "1"));
  }

  if (const char* text = lookup("NCCL_CAR_COPY_IN_KERNEL_BYTES")) {
    std::uint64_t bytes = 0;
    if (!parseUnsigned(text, &bytes) || bytes > kLargestMaxBytes) {
      report(invalid("NCCL_CAR_COPY_IN_KERNEL_BYTES", text,
                     fmt::format("expected a whole number of bytes from 0 to {}", kLargestMaxBytes),
                     std::to_string(kDefaultCopyInKernelBytes)));
    } else {
      config.copyInKernelBytes = static_cast<std::size_t>(bytes);
    }
  }

  if (const char* text = lookup("NCCL_CAR_DEBUG")) {
    if (equalsIgnoringCase(text, "WARN")) config.logLevel = LogLevel::Warn;
    else if (equalsIgnoringCase(text, "INFO")) config.logLevel = LogLevel::Info;
    else if (equalsIgnoringCase(text, "TRACE")) config.logLevel = LogLevel::Trace;
    else report(invalid("NCCL_CAR_DEBUG", text, "expected WARN, INFO or TRACE", "WARN"));
  }

  if (const char* text = lookup("NCCL_CAR_NCCL_LIB")) {
    if (text[0] == '\0') report(invalid("NCCL_CAR_NCCL_LIB", text, "empty path", "(search)"));
    else config.ncclLibrary = text;
  }
  return config;
}

SharedSettings sharedSettingsOf(const Config& config) {
  SharedSettings settings{};
  settings.maxBytes = config.maxBytes;
  settings.pushMaxBytes = config.pushMaxBytes;
  settings.maxBlocks = config.maxBlocks;
  settings.algorithm = static_cast<std::int32_t>(config.algorithm);
  settings.disable = config.disable ? 1 : 0;
  return settings;
}

const char* firstDifferingVariable(const SharedSettings& a, const SharedSettings& b) {
  if (a.disable != b.disable) return "NCCL_CAR_DISABLE";
  if (a.algorithm != b.algorithm) return "NCCL_CAR_ALGO";
  if (a.maxBytes != b.maxBytes) return "NCCL_CAR_MAX_BYTES";
  if (a.pushMaxBytes != b.pushMaxBytes) return "NCCL_CAR_PUSH_MAX_BYTES";
  if (a.maxBlocks != b.maxBlocks) return "NCCL_CAR_MAX_BLOCKS";
  return nullptr;
}

}  // namespace car
