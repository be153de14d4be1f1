#include "handshake/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace car {
namespace {

std::uint64_t namespaceInode(const char* path) {
  struct stat info {};
  return stat(path, &info) == 0 ? static_cast<std::uint64_t>(info.st_ino) : 0;
}

std::string bootId() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(file, id);
  return id;
}

}  // namespace

const ProcessIdentity& processIdentity() {
  static const ProcessIdentity identity = [] {
    ProcessIdentity self;
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
    self.host = std::string(name) + "/" + bootId();
    self.pid = static_cast<std::int32_t>(getpid());
    self.ipcNamespace = namespaceInode("/proc/self/ns/ipc");
    self.pidNamespace = namespaceInode("/proc/self/ns/pid");
    return self;
  }();
  return identity;
}

}  // namespace car
