#include "log.h"

#include <cuda_runtime_api.h>
#include <spdlog/logger.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "log_file.h"

namespace car {
namespace {

std::atomic<int> gLevel{static_cast<int>(LogLevel::Warn)};

// Leaked on purpose, like the logger: logging must work during static destruction.
MovableSink& movableSink() {
  static MovableSink* sink = [] {
    auto* created = new MovableSink();
    pthread_atfork([] { movableSink().holdForFork(); }, [] { movableSink().releaseAfterFork(); },
                   [] { movableSink().releaseAfterFork(); });
    return created;
  }();
  return *sink;
}

// A private logger, never registered globally: the host program may use spdlog itself.
spdlog::logger& sink() {
  static spdlog::logger* logger = [] {
    // The sink is owned by the static above; the logger's pointer must never delete it.
    std::shared_ptr<MovableSink> shared(&movableSink(), [](MovableSink*) {});
    auto* created = new spdlog::logger("nccl-car", std::move(shared));
    created->set_pattern("%v");
    created->set_level(spdlog::level::trace);
    created->flush_on(spdlog::level::trace);
    return created;
  }();
  return *logger;
}

// Leaked too: a line logged at exit (shim/lifecycle/exit_counts.cc) may come after the
// static destructors of whatever was made after it.
const std::string& hostName() {
  static const std::string* name = [] {
    char buffer[256] = {};
    if (gethostname(buffer, sizeof(buffer) - 1) != 0) return new std::string("unknown");
    return new std::string(buffer);
  }();
  return *name;
}

}  // namespace

void readyLogForFork() { static_cast<void>(movableSink()); }

bool logToFile(const std::string& pattern, std::string* why) {
  const std::string path = expandLogFileName(pattern, hostName(), static_cast<long>(getpid()));
  // "e": close-on-exec, so a program the host process starts does not inherit our log.
  std::FILE* file = std::fopen(path.c_str(), "we");
  if (file == nullptr) {
    if (why != nullptr) *why = fmt::format("cannot open '{}' ({})", path, std::strerror(errno));
    return false;
  }
  movableSink().moveTo(file);
  return true;
}

void setLogLevel(LogLevel level) { gLevel.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel logLevel() { return static_cast<LogLevel>(gLevel.load(std::memory_order_relaxed)); }

void writeLogLine(LogLevel level, const char* file, int line, int device, const std::string& text) {
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();  // no device here: not an error worth keeping
    device = -1;
  }
  const std::string start = logText(formatLineStart, hostName().c_str(), static_cast<long>(getpid()),
                                    static_cast<long>(syscall(SYS_gettid)), device, level, file, line);
  sink().info("{}{}", start, text);
}

}  // namespace car
