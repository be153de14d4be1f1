#include "shim_config.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "log.h"

namespace car {

const Config& shimConfig() {
  static const Config config = [] {
    std::vector<std::string> problems;
    Config parsed = parseConfig(
        [](const char* name) {
          // A library to load is never taken from the environment of a set-uid or set-gid
          // program (glibc's secure_getenv answers null there).
          return std::strcmp(name, "NCCL_CAR_NCCL_LIB") == 0 ? secure_getenv(name) : std::getenv(name);
        },
        &problems);
    setLogLevel(parsed.logLevel);
    for (const std::string& problem : problems) CAR_WARN(-1, "{}", problem);
    return parsed;
  }();
  return config;
}

const void* ownLibraryBase() {
  static const void* base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<const void*>(&ownLibraryBase), &info) != 0 ? info.dli_fbase : nullptr;
  }();
  return base;
}

}  // namespace car
