#include "exports/shim_config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "choice_table.h"
#include "exports/fault_injection.h"
#include "exports/real_nccl.h"
#include "log.h"
#include "machine_fingerprint.h"

namespace car {
namespace {

// What is wrong with NCCL_CAR_TABLE's file, said when the settings are read: a set-up, where
// the table is taken, may never come (no GPU). Empty when it reads as a table.
std::string tableFileProblem(const std::string& path) {
  if (path.empty() || path == kBuiltInTable) return {};
  std::ifstream file(path);
  std::string why;
  struct stat info {};
  if (stat(path.c_str(), &info) != 0 || !file) {
    why = fmt::format("cannot be read ({})", std::strerror(errno));
  } else if (!S_ISREG(info.st_mode)) {
    why = "is not a file";
  } else {
    std::ostringstream text;
    text << file.rdbuf();
    if (text.str().empty()) why = "is empty";
    else if (!ChoiceTable::parse(text.str(), std::nullopt, &why)) why = "is not a choice table: " + why;
  }
  if (why.empty()) return {};
  return fmt::format("NCCL_CAR_TABLE={} {}; it takes a table nccl-car tune wrote, or {}; the built-in rule applies",
                     path, why, kBuiltInTable);
}

}  // namespace

const Config& shimConfig() {
  static const Config config = [] {
    std::vector<std::string> problems;
    Config parsed = parseConfig(&processEnvironment, &problems);
    setLogLevel(parsed.logLevel);
    std::string why;
    if (!parsed.debugFile.empty() && !logToFile(parsed.debugFile, &why)) {
      problems.push_back(fmt::format("NCCL_CAR_DEBUG_FILE: {}; logging to stderr", why));
    }
    const std::string tableProblem = tableFileProblem(parsed.tablePath);
    if (!tableProblem.empty()) problems.push_back(tableProblem);
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

namespace {

int realNcclVersion() {
  const RealNccl* real = realNccl();
  int version = 0;
  if (real == nullptr || real->getVersion == nullptr || real->getVersion(&version) != ncclSuccess) return 0;
  return version;
}

// The table for this machine, or null (said why, once).
std::shared_ptr<const ChoiceTable> loadTable(const Config& config, int device) {
  MachineDescription machine;
  if (describeMachine(device, realNcclVersion(), &machine) != cudaSuccess) {
    CAR_WARN(device, "cannot describe this machine for its choice table; the built-in rule applies");
    return nullptr;
  }
  if (config.tablePath == kBuiltInTable) {
    CAR_INFO(device, "NCCL_CAR_TABLE={}: the built-in rule applies", kBuiltInTable);
    return nullptr;
  }
  const bool named = !config.tablePath.empty();
  const std::string path = named ? config.tablePath : defaultTablePath(machine.fingerprint, [](const char* name) -> const char* { return secure_getenv(name); });
  std::ifstream file(path);
  if (path.empty() || !file) {
    // A named file that cannot be read was WARNed when the settings were read (tableFileProblem).
    if (named) CAR_INFO(device, "NCCL_CAR_TABLE: cannot read {}; the built-in rule applies", path);
    else CAR_INFO(device, "no choice table for this machine ({}); the built-in rule applies",
                  path.empty() ? "no cache folder" : path);
    return nullptr;
  }
  std::ostringstream text;
  text << file.rdbuf();
  std::string why;
  std::optional<ChoiceTable> table = ChoiceTable::parse(text.str(), machine.fingerprint, &why);
  if (!table) {
    // Another machine's table is found only here; a named file that is no table was WARNed already.
    std::string syntax;
    const bool saidAlready = named && !ChoiceTable::parse(text.str(), std::nullopt, &syntax);
    if (saidAlready) CAR_INFO(device, "choice table {} not used: {}; the built-in rule applies", path, why);
    else CAR_WARN(device, "choice table {} not used: {}; the built-in rule applies", path, why);
    return nullptr;
  }
  CAR_INFO(device, "choice table {} ({} rows, digest {}) for this machine: {}", path, table->rows().size(),
           hex64(table->digest()), machine.text);
  return std::make_shared<const ChoiceTable>(std::move(*table));
}

}  // namespace

const Config& setupConfig(int device) {
  static Config config;
  static std::once_flag once;
  std::call_once(once, [device] {
    config = shimConfig();
    config.table = loadTable(config, device);
    config.tableDigest = config.table ? config.table->digest() : 0;
  });
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
