// libnccl-car-audit.so, an LD_AUDIT module. Every load of NCCL by the program (a DT_NEEDED
// entry, dlopen by name or by path, ctypes) gets the front instead (front_names.h: an empty
// libnccl.so.2 that needs libnccl-car.so, then the real NCCL under a private name), and the
// module answers the front's two searches: libnccl-car.so beside this module, and the file
// the program would have loaded (or NCCL_CAR_NCCL_LIB). The program then finds our hooks
// first and every other function of the real library after them, whatever its version.
// This reaches programs that dlopen NCCL and call it through dlsym(handle), which
// LD_PRELOAD cannot. docs/design.md ("Three ways in") gives the loader rules the choices
// below rest on.
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

#include "exports/front_names.h"
#include "log_format.h"

#define CAR_AUDIT_API extern "C" __attribute__((visibility("default")))

namespace {

char gOurLibrary[PATH_MAX];  // libnccl-car.so beside this module
char gFront[PATH_MAX];       // the front, from there
struct stat gOurFile;
struct stat gFrontFile;
bool gLocated = false;
bool gFound = false;
char gRealNccl[PATH_MAX];  // the first NCCL the program would have loaded
char gAnswer[PATH_MAX + 2];
bool gServing = false;  // the front is loaded in the program

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

bool present(const char* path, struct stat* info) {
  if (stat(path, info) == 0) return true;
  char text[PATH_MAX + 64];
  snprintf(text, sizeof(text), "%s is missing: NCCL loads unchanged, nccl-car is not used", path);
  logLine(car::LogLevel::Warn, __LINE__, text);
  return false;
}

// Finds libnccl-car.so and the front beside this module, once. Without them nothing is
// redirected.
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
  snprintf(gOurLibrary, sizeof(gOurLibrary), "%s/%s", self, CAR_FRONT_OUR_LIBRARY);
  snprintf(gFront, sizeof(gFront), "%s/%s", self, CAR_FRONT_FILE);
  gFound = present(gOurLibrary, &gOurFile) && present(gFront, &gFrontFile);
  return gFound;
}

bool isFile(const char* path) {
  struct stat info;
  return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

bool sameFile(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// The front or the library, under any name (a drop-in folder links to both).
bool isOurs(const char* path) {
  struct stat info;
  return stat(path, &info) == 0 && (sameFile(info, gOurFile) || sameFile(info, gFrontFile));
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
  if (gRealNccl[0] == '\0' && strlen(path) < sizeof(gRealNccl) && !isOurs(path)) {
    snprintf(gRealNccl, sizeof(gRealNccl), "%s", path);
  }
}

// NCCL_CAR_NCCL_LIB when it names a file. One that names none is WARNed by the library (its
// first call, shim/exports/real_nccl.cc), which says what it uses instead.
const char* configuredRealNccl() {
  const char* configured = getenv("NCCL_CAR_NCCL_LIB");
  return configured != nullptr && configured[0] != '\0' && isFile(configured) ? configured : nullptr;
}

// The answer to the front's search for the real NCCL: NCCL_CAR_NCCL_LIB, else what the
// program asked for, spelled "folder/./file". The loader matches a dlopen against loaded
// objects by name before it asks us; under its own name the real NCCL would answer a later
// dlopen of that path, past the front.
char* realNcclAnswer() {
  const char* configured = configuredRealNccl();
  const char* real = configured != nullptr ? configured : gRealNccl;
  const char* slash = strrchr(real, '/');
  if (real[0] == '\0' || slash == nullptr) return nullptr;
  snprintf(gAnswer, sizeof(gAnswer), "%.*s/.%s", static_cast<int>(slash - real), real, slash);
  return gAnswer;
}

}  // namespace

// We use only version-1 callbacks, so any loader that offers version 1 or later will do.
CAR_AUDIT_API unsigned int la_version(unsigned int version) { return version < LAV_CURRENT ? version : LAV_CURRENT; }

// The front may arrive without a search of ours (a drop-in folder as well): from then on a
// search for NCCL must end at it too.
CAR_AUDIT_API unsigned int la_objopen(struct link_map* map, Lmid_t lmid, uintptr_t*) {
  if (!gServing && lmid == LM_ID_BASE && map->l_name != nullptr && strstr(baseName(map->l_name), "nccl") != nullptr &&
      locate()) {
    struct stat info;
    gServing = stat(map->l_name, &info) == 0 && sameFile(info, gFrontFile);
  }
  return 0;  // no symbol binding callbacks: they would slow every call
}

// Called with the name asked for (flag LA_SER_ORIG), then with each path the loader tries.
//  - The front's dependencies, asked by name: answered at once with our library and the
//    real NCCL (the loader still records the name asked, which real_nccl.cc looks up).
//  - An NCCL name (no slash) is let through to the search, so that the first path that
//    exists shows which library the program would get: remembered, and answered with the
//    front, which the loader then records under the name asked (libnccl.so.2), so that later
//    loads by that name find the front first. A search whose answer is already loaded
//    never reaches us.
//  - An NCCL path: remembered, answered with the front.
CAR_AUDIT_API char* la_objsearch(const char* name, uintptr_t*, unsigned int flag) {
  if (flag == LA_SER_ORIG && strcmp(name, CAR_FRONT_REAL_NCCL) == 0) {
    char* answer = realNcclAnswer();
    return answer != nullptr ? answer : const_cast<char*>(name);  // else a drop-in folder's link
  }
  if (flag == LA_SER_ORIG && strcmp(name, CAR_FRONT_OUR_LIBRARY) == 0 && locate()) return gOurLibrary;
  if (!isNcclName(baseName(name)) || !locate()) return const_cast<char*>(name);
  const bool exists = isFile(name);
  if (flag == LA_SER_ORIG && (strchr(name, '/') == nullptr || !exists)) return const_cast<char*>(name);
  if (!exists && !gServing) return const_cast<char*>(name);  // not in this folder: the loader tries the next
  if (exists && !isOurs(name)) {
    remember(name);
    char served[3 * PATH_MAX + 64];
    car::formatAuditServed(served, sizeof(served), name, gFront, gRealNccl[0] != '\0' ? gRealNccl : nullptr);
    logLine(car::LogLevel::Info, __LINE__, served);
  }
  gServing = true;
  return gFront;
}
