// libnccl-car-audit.so, an LD_AUDIT module. Every load of NCCL by the program (a DT_NEEDED
// entry, dlopen by name or by path, ctypes) loads libnccl-car.so from this module's folder
// instead, and the module remembers the file the program would have loaded, which
// libnccl-car.so then forwards to (audit_query.h). This reaches programs that dlopen NCCL
// and call it through dlsym(handle), which LD_PRELOAD cannot. docs/design.md ("Three ways
// in") gives the loader rules the choices below rest on.
//
// It runs inside the dynamic linker, in a namespace of its own, under the loader's lock:
// libc only (no C++ runtime, no dlopen), fixed buffers. Nothing runs at load time but
// la_version.
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "exports/audit_query.h"
#include "log_format.h"

#define CAR_AUDIT_API extern "C" __attribute__((visibility("default")))

namespace {

char gOurLibrary[PATH_MAX];  // libnccl-car.so beside this module
struct stat gOurFile;
bool gLocated = false;
bool gFound = false;
char gRealNccl[PATH_MAX];  // the first NCCL the program would have loaded
char gAnswer[PATH_MAX + 2];
bool gServing = false;  // libnccl-car.so is loaded in the program

// One line in the library's format (log_format.h), so that nccl-car run counts it; one
// writev() per line. NCCL_CAR_DEBUG is read as the library reads it.
void logLine(car::LogLevel level, int line, const char* text) {
  if (level > car::logLevelNamed(getenv("NCCL_CAR_DEBUG"))) return;
  char host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  char start[512];
  const size_t length = car::formatLineStart(start, sizeof(start), host, getpid(), syscall(SYS_gettid), -1, level,
                                             __FILE__, line);
  char newline[] = "\n";
  iovec parts[] = {{start, length < sizeof(start) ? length : sizeof(start) - 1},
                   {const_cast<char*>(car::kAuditTag), strlen(car::kAuditTag)},
                   {const_cast<char*>(text), strlen(text)},
                   {newline, 1}};
  [[maybe_unused]] const ssize_t written = writev(STDERR_FILENO, parts, sizeof(parts) / sizeof(parts[0]));
}

// Finds libnccl-car.so beside this module, once. Without it nothing is redirected.
bool locate() {
  if (gLocated) return gFound;
  gLocated = true;
  Dl_info info{};
  char self[PATH_MAX];
  if (dladdr(reinterpret_cast<void*>(&locate), &info) == 0 || info.dli_fname == nullptr ||
      realpath(info.dli_fname, self) == nullptr) {
    logLine(car::LogLevel::Warn, __LINE__, "cannot tell where this module is: NCCL loads unchanged");
    return false;
  }
  char* slash = strrchr(self, '/');
  if (slash != nullptr) *slash = '\0';
  snprintf(gOurLibrary, sizeof(gOurLibrary), "%s/libnccl-car.so", self);
  gFound = stat(gOurLibrary, &gOurFile) == 0;
  if (!gFound) {
    char text[PATH_MAX + 64];
    snprintf(text, sizeof(text), "%s is missing: NCCL loads unchanged, nccl-car is not used", gOurLibrary);
    logLine(car::LogLevel::Warn, __LINE__, text);
  }
  return gFound;
}

bool isFile(const char* path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

bool isOurLibrary(const char* path) {
  struct stat info;
  return stat(path, &info) == 0 && info.st_dev == gOurFile.st_dev && info.st_ino == gOurFile.st_ino;
}

// libnccl.so, libnccl.so.2, libnccl.so.2.28.9; not libnccl-net.so (NCCL's own plugins).
bool isNcclName(const char* base) {
  return strcmp(base, "libnccl.so") == 0 || strncmp(base, "libnccl.so.", strlen("libnccl.so.")) == 0;
}

const char* baseName(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

void remember(const char* path) {
  if (gRealNccl[0] == '\0' && strlen(path) < sizeof(gRealNccl) && !isOurLibrary(path)) {
    snprintf(gRealNccl, sizeof(gRealNccl), "%s", path);
  }
}

// The answer to libnccl-car.so's query: NCCL_CAR_NCCL_LIB, else what the program asked for,
// spelled "folder/./file". The loader matches a dlopen against loaded objects by name before
// it asks us; under its own name the real NCCL would answer a later dlopen of that path.
char* realNcclAnswer() {
  const char* configured = getenv("NCCL_CAR_NCCL_LIB");
  const char* real = configured != nullptr && configured[0] != '\0' ? configured : gRealNccl;
  const char* slash = strrchr(real, '/');
  if (real[0] == '\0' || slash == nullptr) return nullptr;
  snprintf(gAnswer, sizeof(gAnswer), "%.*s/.%s", static_cast<int>(slash - real), real, slash);
  return gAnswer;
}

}  // namespace

// We use only version-1 callbacks, so any loader that offers version 1 or later will do.
CAR_AUDIT_API unsigned int la_version(unsigned int version) { return version < LAV_CURRENT ? version : LAV_CURRENT; }

// libnccl-car.so may arrive without us (LD_PRELOAD as well): then a search for NCCL must
// resolve to it, which also gives it the name libnccl.so.2.
CAR_AUDIT_API unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t*) {
  if (!gServing && lmid == LM_ID_BASE && map->l_name != nullptr && strstr(baseName(map->l_name), "nccl") != nullptr &&
      locate() && isOurLibrary(map->l_name)) {
    gServing = true;
  }
  return 0;  // no symbol binding callbacks: they would slow every call
}

// Called with the name the program asked for (flag LA_SER_ORIG), then with each path the
// loader tries. A name (no slash) is let through to the search, so that the first path that
// exists shows which library the program would get; a search whose answer is already loaded
// never reaches us. Once libnccl-car.so is loaded, every search for NCCL ends at it, which
// also records the searched name (libnccl.so.2) as one of its names.
CAR_AUDIT_API char* la_objsearch(const char* name, uintptr_t*, unsigned int flag) {
  if (strcmp(name, CAR_AUDIT_REAL_NCCL_QUERY) == 0) return realNcclAnswer();
  if (!isNcclName(baseName(name)) || !locate()) return const_cast<char*>(name);
  const bool exists = isFile(name);
  if (flag == LA_SER_ORIG && (strchr(name, '/') == nullptr || !exists)) return const_cast<char*>(name);
  if (!exists && !gServing) return const_cast<char*>(name);  // not in this folder: the loader tries the next
  if (exists) {
    remember(name);
    char served[3 * PATH_MAX + 64];
    car::formatAuditServed(served, sizeof(served), name, gOurLibrary, gRealNccl[0] != '\0' ? gRealNccl : nullptr);
    logLine(car::LogLevel::Info, __LINE__, served);
  }
  gServing = true;
  return gOurLibrary;
}
