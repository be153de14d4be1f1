#include "exports/shim_config.h"

#include <dlfcn.h>

#include <string>
#include <vector>

#include "exports/fault_injection.h"
#include "log.h"

namespace car {

const Config& shimConfig() {
  static const Config config = [] {
    std::vector<std::string> problems;
    Config parsed = parseConfig(&processEnvironment, &problems);
    setLogLevel(parsed.logLevel);
    std::string why;
    if (!parsed.debugFile.empty() && !logToFile(parsed.debugFile, &why)) {
      problems.push_back(fmt::format("NCCL_CAR_DEBUG_FILE: {}; logging to stderr", why));
    }
    if (parsed.disable && parsed.deterministic) {
      problems.push_back("NCCL_CAR_DETERMINISTIC with NCCL_CAR_DISABLE: every all-reduce goes to NCCL, which "
                         "promises no invariance");
    }
    for (const std::string& problem : problems) CAR_WARN(-1, "{}", problem);
    // Read here, once, so that the engine's launch path holds no check of its own for it.
    parsed.testLaunchFailure = faultActive(Fault::LaunchError);
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
