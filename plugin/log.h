// NCCL-style log lines: "host:pid:tid [dev] NCCL-CAR INFO message". The level is checked
// before anything is formatted, so a disabled line costs one comparison.
#pragma once

#include <fmt/format.h>

#include <string>

namespace car {

enum class LogLevel { Warn = 0, Info = 1, Trace = 2 };
constexpr int kLogLevelCount = 3;

// "WARN", "INFO", "TRACE": how lines show the level and how NCCL_CAR_DEBUG names it.
const char* logLevelName(LogLevel level);

void setLogLevel(LogLevel level);
LogLevel logLevel();
inline bool logEnabled(LogLevel level) { return static_cast<int>(level) <= static_cast<int>(logLevel()); }

// Sends every later line to the file `pattern` names (log_file.h: %h host, %p pid), truncated
// first. Returns false, and the lines stay on stderr, when it cannot be opened; *why says
// why. Meant to be called once, when the settings are read.
bool logToFile(const std::string& pattern, std::string* why);

// device < 0 prints the calling thread's current CUDA device, if any.
void writeLogLine(LogLevel level, const char* file, int line, int device, const std::string& text);

}  // namespace car

#define CAR_LOG(level, device, ...)                                                  \
  do {                                                                               \
    if (::car::logEnabled(level))                                                    \
      ::car::writeLogLine(level, __FILE__, __LINE__, device, fmt::format(__VA_ARGS__)); \
  } while (0)

#define CAR_WARN(device, ...) CAR_LOG(::car::LogLevel::Warn, device, __VA_ARGS__)
#define CAR_INFO(device, ...) CAR_LOG(::car::LogLevel::Info, device, __VA_ARGS__)
#define CAR_TRACE(device, ...) CAR_LOG(::car::LogLevel::Trace, device, __VA_ARGS__)
