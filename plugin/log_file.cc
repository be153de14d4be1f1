#include "log_file.h"

namespace car {

std::string expandLogFileName(const std::string& pattern, const std::string& host, long pid) {
  std::string name;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (pattern[i] != '%' || (next != 'h' && next != 'p' && next != '%')) {
      name += pattern[i];
      continue;
    }
    if (next == 'h') name += host;
    if (next == 'p') name += std::to_string(pid);
    if (next == '%') name += '%';
    ++i;
  }
  return name;
}

void MovableSink::moveTo(std::FILE* file) {
  std::lock_guard<std::mutex> lock(mutex_);
  file_ = file;
}

void MovableSink::sink_it_(const spdlog::details::log_msg& message) {
  spdlog::memory_buf_t line;
  formatter_->format(message, line);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);  // a rank that hangs or is killed must leave its last lines behind
}

void MovableSink::flush_() { std::fflush(file_); }

}  // namespace car
