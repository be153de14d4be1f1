// NCCL-style log lines: "host:pid:tid [dev] NCCL-CAR INFO message" (their shape:
// log_format.h). The level is checked before anything is formatted, so a disabled line costs
// one comparison.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string>

#include "log_format.h"

namespace car {

void setLogLevel(LogLevel level);
LogLevel logLevel();
inline bool logEnabled(LogLevel level) { return static_cast<int>(level) <= static_cast<int>(logLevel()); }

// Sends every later line to the file `pattern` names (log_file.h: %h host, %p pid), truncated
// first. Returns false, and the lines stay on stderr, when it cannot be opened; *why says
// why. Meant to be called once, when the settings are read.
bool logToFile(const std::string& pattern, std::string* why);

// Registers the log's fork() handlers, which hold its lock while the process is copied, if
// they are not yet. pthread_atfork runs prepare handlers in reverse order of registration:
// whoever registers handlers of its own calls this after them, so that a fork waits for a
// line being written before it takes their lock.
void readyLogForFork();

// device < 0 prints the calling thread's current CUDA device, if any.
void writeLogLine(LogLevel level, const char* file, int line, int device, const std::string& text);

// The text one of log_format.h's functions writes, as a string:
// CAR_INFO(device, "{}", logText(formatRealNcclFound, origin)).
template <typename... Params, typename... Given>
std::string logText(std::size_t (*format)(char*, std::size_t, Params...), const Given&... given) {
  const std::size_t length = format(nullptr, 0, given...);
  std::string text(length, '\0');
  format(text.data(), length + 1, given...);
  return text;
}

}  // namespace car

#define CAR_LOG(level, device, ...)                                                  \
  do {                                                                               \
    if (::car::logEnabled(level))                                                    \
      ::car::writeLogLine(level, __FILE__, __LINE__, device, fmt::format(__VA_ARGS__)); \
  } while (0)

#define CAR_WARN(device, ...) CAR_LOG(::car::LogLevel::Warn, device, __VA_ARGS__)
#define CAR_INFO(device, ...) CAR_LOG(::car::LogLevel::Info, device, __VA_ARGS__)
#define CAR_TRACE(device, ...) CAR_LOG(::car::LogLevel::Trace, device, __VA_ARGS__)
