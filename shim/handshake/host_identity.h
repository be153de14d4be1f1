// Who and where this process is, as the handshake compares it. The host is our own
// identity (hostname plus boot id), not NCCL's host hash, which NCCL_HOSTID changes: the
// one-GPU test rig gives every rank its own NCCL_HOSTID on one real host.
#pragma once

#include <cstdint>
#include <string>

namespace car {

struct ProcessIdentity {
  std::string host;            // "hostname/boot-id"
  std::int32_t pid = 0;
  std::uint64_t ipcNamespace = 0;  // inode of /proc/self/ns/ipc; 0 if unknown
  std::uint64_t pidNamespace = 0;  // inode of /proc/self/ns/pid; 0 if unknown
};

const ProcessIdentity& processIdentity();

}  // namespace car
