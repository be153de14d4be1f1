#include "exports/real_nccl.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "log.h"
#include "exports/front_names.h"
#include "exports/shim_config.h"

namespace car {
namespace {

// The build's include path must find the nccl.h CMake read (CUDA's folder may hold another).
static_assert(NCCL_VERSION_CODE == CAR_NCCL_H_VERSION_CODE, "nccl.h is not the one CMake found");

#define CAR_TEXT(x) #x
#define CAR_TEXT_OF(x) CAR_TEXT(x)
#define CAR_NCCL_H_VERSION CAR_TEXT_OF(NCCL_MAJOR) "." CAR_TEXT_OF(NCCL_MINOR) "." CAR_TEXT_OF(NCCL_PATCH)
// The nccl.h this library was built against, also as text in the file: `nccl-car doctor`
// reads it there to set beside the real NCCL's version.
[[gnu::used]] const char kBuiltAgainst[] = "nccl-car: built against nccl.h " CAR_NCCL_H_VERSION;

// Looks up every symbol in `handle`; fails if a required one is missing or resolves back
// to our own hook (a preload loaded twice must not call itself forever). Required: the
// functions NCCL 2.12 had that we call; the rest may be missing (an older NCCL), and their
// hooks then answer ncclInvalidUsage (reportMissing).
bool fill(void* handle, RealNccl* table, const char* origin) {
  bool complete = true;
  auto load = [&](auto& function, const char* name, bool required) {
    void* symbol = realSymbol(handle, name);
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(symbol);
    if (symbol == nullptr && required) complete = false;
  };
  load(table->allReduce, "ncclAllReduce", true);
  load(table->allGather, "ncclAllGather", true);
  load(table->reduceScatter, "ncclReduceScatter", true);
  load(table->commInitRank, "ncclCommInitRank", true);
  load(table->commInitRankConfig, "ncclCommInitRankConfig", false);
  load(table->commInitRankScalable, "ncclCommInitRankScalable", false);
  load(table->commInitAll, "ncclCommInitAll", true);
  load(table->commSplit, "ncclCommSplit", false);
  load(table->commShrink, "ncclCommShrink", false);
  load(table->commRevoke, "ncclCommRevoke", false);
  load(table->commDestroy, "ncclCommDestroy", true);
  load(table->commAbort, "ncclCommAbort", true);
  load(table->commFinalize, "ncclCommFinalize", false);
  load(table->groupStart, "ncclGroupStart", true);
  load(table->groupEnd, "ncclGroupEnd", true);
  load(table->groupSimulateEnd, "ncclGroupSimulateEnd", false);
  load(table->commWindowRegister, "ncclCommWindowRegister", false);
  load(table->commWindowDeregister, "ncclCommWindowDeregister", false);
  load(table->commGetAsyncError, "ncclCommGetAsyncError", true);
  load(table->commCount, "ncclCommCount", true);
  load(table->commUserRank, "ncclCommUserRank", true);
  load(table->commCuDevice, "ncclCommCuDevice", true);
  load(table->getErrorString, "ncclGetErrorString", true);
  load(table->getVersion, "ncclGetVersion", true);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  load(table->commGrow, "ncclCommGrow", false);
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 7)
  load(table->commSuspend, "ncclCommSuspend", false);
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
  load(table->allReduceConfig, "ncclAllReduceConfig", false);
  load(table->allGatherConfig, "ncclAllGatherConfig", false);
  load(table->reduceScatterConfig, "ncclReduceScatterConfig", false);
#endif
  table->origin = origin;
  return complete;
}

// The file `table` came from, links resolved (a drop-in folder's, the audit module's
// "folder/./file" spelling).
std::string fileOf(const RealNccl& table) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(table.getVersion), &info) == 0 || info.dli_fname == nullptr) return "?";
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
}

bool fillFrom(void* handle, RealNccl* table, const char* how) {
  static std::string described;  // RealNccl::origin points here; resolution is serialised
  if (!fill(handle, table, how)) return false;
  described = std::string(how) + ": " + fileOf(*table);
  table->origin = described.c_str();
  return true;
}

bool resolve(RealNccl* table, std::string* failure) {
  // Behind us in our lookup scope: the NCCL a program links (LD_PRELOAD), or the real NCCL
  // behind the front (LD_AUDIT, a drop-in folder: docs/design.md, "Three ways in").
  if (fillFrom(RTLD_NEXT, table, "the next library (RTLD_NEXT)")) return true;
  // The real NCCL behind a front that RTLD_NEXT cannot see (we are also preloaded, and the
  // program dlopened the front), under the name the front asked for it by.
  if (void* behind = dlopen(CAR_FRONT_REAL_NCCL, RTLD_NOLOAD | RTLD_LAZY)) {
    if (fillFrom(behind, table, "the front's real NCCL")) return true;
  }
  // Already loaded, but not in our lookup scope (PyTorch dlopens its NCCL privately).
  if (void* loaded = dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_LAZY)) {
    if (fillFrom(loaded, table, "the loaded libnccl.so.2")) return true;
  }
  const std::string& configured = shimConfig().ncclLibrary;
  const char* path = configured.empty() ? "libnccl.so.2" : configured.c_str();
  void* opened = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (opened != nullptr && fillFrom(opened, table, configured.empty() ? "dlopen(libnccl.so.2)" : "NCCL_CAR_NCCL_LIB")) {
    return true;
  }
  // What we opened may be a front (a drop-in folder on LD_LIBRARY_PATH): its real NCCL came with it.
  if (void* behind = dlopen(CAR_FRONT_REAL_NCCL, RTLD_NOLOAD | RTLD_LAZY)) {
    if (fillFrom(behind, table, "the front's real NCCL")) return true;
  }
  if (opened == nullptr) {
    const char* error = dlerror();
    *failure = error != nullptr ? error : path;
  } else {
    *failure = std::string(path) + " lacks NCCL functions";
  }
  return false;
}

// NCCL_CAR_NCCL_LIB names a file the library does not forward to: said once, at resolution.
void sayConfiguredUnused(const RealNccl& table) {
  const std::string& configured = shimConfig().ncclLibrary;
  if (configured.empty()) return;
  struct stat wanted {}, found {};
  const std::string file = fileOf(table);
  if (stat(configured.c_str(), &wanted) != 0 || !S_ISREG(wanted.st_mode)) {
    CAR_WARN(-1, "NCCL_CAR_NCCL_LIB={} is not a file: it takes the path of the real libnccl.so.2; the real NCCL is "
                 "{} instead", configured, table.origin);
  } else if (stat(file.c_str(), &found) != 0 || found.st_dev != wanted.st_dev || found.st_ino != wanted.st_ino) {
    CAR_WARN(-1, "NCCL_CAR_NCCL_LIB={} is not used: the real NCCL is {} (the setting is consulted only where the "
                 "program has no NCCL loaded, and under LD_AUDIT)", configured, table.origin);
  }
}

}  // namespace

void* realSymbol(void* handle, const char* name) {
  void* symbol = dlsym(handle, name);
  Dl_info info{};
  if (symbol != nullptr && dladdr(symbol, &info) != 0 && info.dli_fbase == ownLibraryBase()) return nullptr;
  return symbol;
}

void reportMissing(const RealNccl& real, const char* name) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!reported.insert(name).second) return;
  }
  CAR_WARN(-1, "{} is not in the real NCCL ({}, an older version?): it returns ncclInvalidUsage", name, real.origin);
}

const RealNccl* realNccl() {
  shimConfig();  // sets the log level first, so what we log below is shown at INFO
  static RealNccl table{};
  static std::atomic<bool> ready{false};
  static std::mutex mutex;
  static bool warned = false;
  if (ready.load(std::memory_order_acquire)) return &table;
  std::lock_guard<std::mutex> lock(mutex);
  if (ready.load(std::memory_order_relaxed)) return &table;
  RealNccl candidate{};
  std::string failure;
  if (!resolve(&candidate, &failure)) {
    if (!warned) {
      warned = true;
      CAR_WARN(-1, "cannot find the real NCCL library ({}); set NCCL_CAR_NCCL_LIB to the path of "
                   "libnccl.so.2. Until then every NCCL call we hook returns ncclSystemError.", failure);
    }
    return nullptr;
  }
  table = candidate;
  ready.store(true, std::memory_order_release);
  CAR_INFO(-1, "{}", logText(formatRealNcclFound, table.origin, CAR_NCCL_H_VERSION));
  sayConfiguredUnused(table);
  return &table;
}

}  // namespace car
