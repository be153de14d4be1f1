// Where log lines go: stderr until NCCL_CAR_DEBUG_FILE names a file. The file name takes %h
// (host name) and %p (process id), as NCCL_DEBUG_FILE does, so that every rank of a job
// writes its own file.
#pragma once

#include <spdlog/sinks/base_sink.h>

#include <cstdio>
#include <mutex>
#include <string>

namespace car {

// `pattern` with %h replaced by `host`, %p by `pid` and %% by %; any other % stays as written.
std::string expandLogFileName(const std::string& pattern, const std::string& host, long pid);

// A sink that writes each line to stderr and can be moved to a file once; moving takes the
// sink's own lock, so it is safe while other threads log.
class MovableSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  // Later lines go to `file`, which the sink keeps open for the life of the process.
  void moveTo(std::FILE* file);
  // Around fork() (pthread_atfork): the forking thread holds the lock while the process is
  // copied, so a child never inherits it held by a thread that does not exist there, which
  // would make the child's first line wait for good.
  void holdForFork() { mutex_.lock(); }
  void releaseAfterFork() { mutex_.unlock(); }

 private:
  void sink_it_(const spdlog::details::log_msg& message) override;
  void flush_() override;

  std::FILE* file_ = stderr;
};

}  // namespace car
