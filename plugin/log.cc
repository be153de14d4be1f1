#include "log.h"

#include <cuda_runtime_api.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>

namespace car {
namespace {

std::atomic<int> gLevel{static_cast<int>(LogLevel::Warn)};

// A private logger, never registered globally: the host program may use spdlog itself.
spdlog::logger& sink() {
  static spdlog::logger* logger = [] {
    auto* created = new spdlog::logger("nccl-car", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    created->set_pattern("%v");
    created->set_level(spdlog::level::trace);
    created->flush_on(spdlog::level::trace);
    return created;  // leaked on purpose: logging must work during static destruction
  }();
  return *logger;
}

const std::string& hostName() {
  static const std::string name = [] {
    char buffer[256] = {};
    if (gethostname(buffer, sizeof(buffer) - 1) != 0) return std::string("unknown");
    return std::string(buffer);
  }();
  return name;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
  }
  return "?";
}

const char* baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

}  // namespace

void setLogLevel(LogLevel level) { gLevel.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel logLevel() { return static_cast<LogLevel>(gLevel.load(std::memory_order_relaxed)); }

void writeLogLine(LogLevel level, const char* file, int line, int device, const std::string& text) {
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();  // no device here: not an error worth keeping
    device = -1;
  }
  const std::string where =
      level == LogLevel::Warn ? fmt::format("{}:{} ", baseName(file), line) : std::string();
  sink().info("{}:{}:{} [{}] {}NCCL-CAR {} {}", hostName(), getpid(),
              static_cast<long>(syscall(SYS_gettid)), device, where, levelName(level), text);
}

}  // namespace car
