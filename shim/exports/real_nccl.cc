#include "exports/real_nccl.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

#include "log.h"
#include "exports/real_nccl_by_path.h"
#include "exports/shim_config.h"

namespace car {
namespace {

// Looks up every symbol in `handle`; fails if a required one is missing or resolves back
// to our own hook (a preload loaded twice must not call itself forever).
bool fill(void* handle, RealNccl* table, const char* origin) {
  bool complete = true;
  auto load = [&](auto& function, const char* name, bool required) {
    void* symbol = realSymbol(handle, name);
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(symbol);
    if (symbol == nullptr && required) complete = false;
  };
  load(table->allReduce, "ncclAllReduce", true);
  load(table->allGather, "ncclAllGather", true);
  load(table->commInitRank, "ncclCommInitRank", true);
  load(table->commInitRankConfig, "ncclCommInitRankConfig", true);
  load(table->commInitRankScalable, "ncclCommInitRankScalable", false);
  load(table->commInitAll, "ncclCommInitAll", true);
  load(table->commSplit, "ncclCommSplit", true);
  load(table->commShrink, "ncclCommShrink", false);
  load(table->commRevoke, "ncclCommRevoke", false);
  load(table->commDestroy, "ncclCommDestroy", true);
  load(table->commAbort, "ncclCommAbort", true);
  load(table->commFinalize, "ncclCommFinalize", true);
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
  table->origin = origin;
  table->handle = handle;
  return complete;
}

bool resolve(RealNccl* table, std::string* failure) {
  if (fill(RTLD_NEXT, table, "the next library (RTLD_NEXT)")) return true;
  // Already loaded, but not in our lookup scope (PyTorch dlopens its NCCL privately).
  if (void* loaded = dlopen("libnccl.so.2", RTLD_NOLOAD | RTLD_LAZY)) {
    if (fill(loaded, table, "the loaded libnccl.so.2")) return true;
  }
  const std::string& configured = shimConfig().ncclLibrary;
  const char* path = configured.empty() ? "libnccl.so.2" : configured.c_str();
  void* opened = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (opened != nullptr &&
      fill(opened, table, configured.empty() ? "dlopen(libnccl.so.2)" : "NCCL_CAR_NCCL_LIB")) {
    return true;
  }
  // When we are the libnccl.so.2 the program loaded (LD_AUDIT, a drop-in folder), the
  // lookups above found only us: the real one must be opened by path.
  const bool foundUs = opened != nullptr && dlsym(opened, "ncclGetVersion") != nullptr &&
                       realSymbol(opened, "ncclGetVersion") == nullptr;
  if (opened == nullptr) {
    const char* error = dlerror();
    *failure = error != nullptr ? error : path;
  } else {
    *failure = std::string(path) + (foundUs ? " is libnccl-car.so itself" : " lacks NCCL functions");
  }
  if (opened == nullptr || foundUs) {
    const char* byPathOrigin = nullptr;
    if (void* real = openRealNcclByPath(!configured.empty(), &byPathOrigin, failure)) {
      if (fill(real, table, byPathOrigin)) return true;
      *failure = std::string(byPathOrigin) + " lacks NCCL functions";
    }
  }
  return false;
}

}  // namespace

void* realSymbol(void* handle, const char* name) {
  void* symbol = dlsym(handle, name);
  Dl_info info{};
  if (symbol != nullptr && dladdr(symbol, &info) != 0 && info.dli_fbase == ownLibraryBase()) return nullptr;
  return symbol;
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
  CAR_INFO(-1, "real NCCL found as {}", table.origin);
  return &table;
}

}  // namespace car
