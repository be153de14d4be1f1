// A call of any NCCL signature as a call-log line, "ncclName arg0=... arg1=...": pointers in
// hex, numbers and enum values as integers. The stand-in records the functions it has no
// hand-written version of this way (standin_generic.cc), and the drivers build the line they
// expect for such a call the same way (driver_forwarded.cc).
#pragma once

#include <nccl.h>

#include <string>
#include <type_traits>

#include "call_line.h"

namespace standin {

template <typename T>
void addArgument(CallLine& line, const std::string& key, T value) {
  if constexpr (std::is_pointer_v<T>) {
    line.ptr(key.c_str(), reinterpret_cast<const void*>(value));
  } else if constexpr (std::is_same_v<T, ncclUniqueId>) {
    line.id(key.c_str(), value);
  } else {
    line.num(key.c_str(), static_cast<long long>(value));
  }
}

template <typename... Args>
CallLine genericCall(const char* name, Args... args) {
  CallLine line(name);
  int index = 0;
  (addArgument(line, "arg" + std::to_string(index++), args), ...);
  return line;
}

}  // namespace standin
