#include "exports/real_nccl_by_path.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <vector>

#include "exports/audit_query.h"
#include "exports/real_nccl.h"

namespace car {
namespace {

// The folders the loader searches when the program itself asks for a library by name:
// LD_LIBRARY_PATH, the program's RUNPATH and the system folders (not ld.so.cache).
std::vector<std::string> loaderDirectories() {
  std::vector<std::string> folders;
  void* program = dlopen(nullptr, RTLD_LAZY);
  Dl_serinfo size{};
  if (program == nullptr || dlinfo(program, RTLD_DI_SERINFOSIZE, &size) != 0) return folders;
  std::vector<std::max_align_t> storage(size.dls_size / sizeof(std::max_align_t) + 1);
  auto* info = reinterpret_cast<Dl_serinfo*>(storage.data());
  if (dlinfo(program, RTLD_DI_SERINFOSIZE, info) != 0 || dlinfo(program, RTLD_DI_SERINFO, info) != 0) return folders;
  for (unsigned int i = 0; i < info->dls_cnt; ++i) folders.emplace_back(info->dls_serpath[i].dls_name);
  return folders;
}

std::vector<std::string> candidateFolders() {
  std::vector<std::string> folders = loaderDirectories();
  folders.emplace_back("/usr/local/cuda/lib64");
  std::vector<std::string> unique;
  for (const std::string& folder : folders) {
    if (!folder.empty() && std::find(unique.begin(), unique.end(), folder) == unique.end()) unique.push_back(folder);
  }
  return unique;
}

bool isFile(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// A library that answers ncclGetVersion with someone else's code: a real NCCL, not us.
bool isRealNccl(void* handle) { return handle != nullptr && realSymbol(handle, "ncclGetVersion") != nullptr; }

// The audit module hands back "folder/./libnccl.so.2" (see nccl_car_audit.cc); shown plainly.
std::string loadedPath(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return "?";
  std::string path = map->l_name;
  for (std::size_t at = path.find("/./"); at != std::string::npos; at = path.find("/./")) path.erase(at, 2);
  return path;
}

}  // namespace

void* openRealNcclByPath(bool configured, const char** origin, std::string* failure) {
  static std::string described;  // RealNccl::origin points here; resolution is serialised
  void* asked = dlopen(CAR_AUDIT_REAL_NCCL_QUERY, RTLD_NOW | RTLD_LOCAL);
  if (isRealNccl(asked)) {
    described = "the library the program asked for (LD_AUDIT): " + loadedPath(asked);
    *origin = described.c_str();
    return asked;
  }
  if (asked == nullptr) dlerror();  // no audit module: the usual case, not an error
  if (configured) return nullptr;

  std::string searched;
  for (const std::string& folder : candidateFolders()) {
    const std::string path = folder + "/libnccl.so.2";
    if (!isFile(path)) continue;
    // Our own file (a drop-in directory) opens as us and is skipped here.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (isRealNccl(handle)) {
      described = path;
      *origin = described.c_str();
      return handle;
    }
    if (handle == nullptr) dlerror();
    searched += (searched.empty() ? "" : ", ") + path;
  }
  *failure += "; no other libnccl.so.2 than nccl-car itself was found by path" +
              (searched.empty() ? std::string() : " (tried " + searched + ")");
  return nullptr;
}

}  // namespace car
