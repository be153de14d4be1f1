// How the test drivers make a call: "@ <label> <expected call line>" goes into the stand-in's
// log (STANDIN_NCCL_LOG) right before the call, and "<label> result=<rc> [key=value...]" to
// stdout right after it. The tests cut the log at the markers and compare.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "call_line.h"

namespace driver {

inline void writeMarker(const std::string& label, const standin::CallLine& expected) {
  static const int fd = [] {
    const char* path = std::getenv("STANDIN_NCCL_LOG");
    return path == nullptr ? -1 : open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  }();
  if (fd < 0) return;
  const std::string line = "@ " + label + " " + expected.str() + "\n";
  [[maybe_unused]] const ssize_t written = write(fd, line.data(), line.size());
}

// One scripted call that returns an ncclResult_t.
template <typename Call>
ncclResult_t step(const std::string& label, const standin::CallLine& expected, Call&& call) {
  writeMarker(label, expected);
  const ncclResult_t rc = call();
  std::printf("%s result=%d\n", label.c_str(), static_cast<int>(rc));
  return rc;
}

// A call that returns a string (ncclGetErrorString, ncclGetLastError).
template <typename Call>
void textStep(const std::string& label, const standin::CallLine& expected, Call&& call) {
  writeMarker(label, expected);
  standin::CallLine printed(label.c_str());
  printed.text("value", call());
  std::printf("%s\n", printed.str().c_str());
}

// "<label> <key>=<value>": what a call produced, for the test to compare with the log.
inline void report(const std::string& label, const char* key, const std::string& value) {
  std::printf("%s %s=%s\n", label.c_str(), key, value.c_str());
}

}  // namespace driver
