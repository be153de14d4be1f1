#include "ipc/peer_mapping.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "cuda_check.h"
#include "device_guard.h"
#include "exports/fault_injection.h"

namespace car {
namespace {

struct OpenedHandle {
  void* pointer = nullptr;
  int references = 0;
  int openedBy = -1;  // the device that was current at cudaIpcOpenMemHandle
};

std::mutex gCacheMutex;
std::map<std::string, OpenedHandle>& cache() {
  static auto* opened = new std::map<std::string, OpenedHandle>();  // outlives static destruction
  return *opened;
}

std::string keyOf(const cudaIpcMemHandle_t& handle) {
  return std::string(reinterpret_cast<const char*>(&handle), sizeof(handle));
}

cudaError_t enablePeerAccess(int myDevice, int peerDevice);

// Opens (or shares) the mapping of `peer`'s block for `myDevice`, the current device.
cudaError_t openShared(const PeerLocation& peer, const PublishedBlock& block, int myDevice, void** pointer) {
  if (faultActive(Fault::IpcOpen)) return cudaErrorMapBufferObjectFailed;
  std::lock_guard<std::mutex> lock(gCacheMutex);
  OpenedHandle& entry = cache()[keyOf(block.handle)];
  if (entry.references == 0) {
    cudaError_t err = cudaIpcOpenMemHandle(&entry.pointer, block.handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      cache().erase(keyOf(block.handle));
      return err;
    }
    entry.openedBy = myDevice;
  } else if (entry.openedBy != myDevice) {
    // Lazy peer access was enabled for the opening device only; this GPU needs its own.
    int owner = -1;
    if (cudaDeviceGetByPCIBusId(&owner, peer.busId.c_str()) == cudaSuccess) {
      cudaError_t err = enablePeerAccess(myDevice, owner);
      if (err != cudaSuccess) return err;
    } else {
      cudaGetLastError();
    }
  }
  ++entry.references;
  *pointer = entry.pointer;
  return cudaSuccess;
}

void closeShared(const std::string& key) {
  std::lock_guard<std::mutex> lock(gCacheMutex);
  auto it = cache().find(key);
  if (it == cache().end()) return;
  if (--it->second.references == 0) {
    // On the device that opened it: a thread driving several GPUs (-g N) may be anywhere.
    DeviceGuard guard(it->second.openedBy);
    CAR_CUDA_RELEASE(it->second.openedBy,
                     guard.error() != cudaSuccess ? guard.error() : cudaIpcCloseMemHandle(it->second.pointer));
    cache().erase(it);
  }
}

cudaError_t enablePeerAccess(int myDevice, int peerDevice) {
  if (peerDevice == myDevice) return cudaSuccess;
  cudaError_t err = cudaDeviceEnablePeerAccess(peerDevice, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();  // not an error for us, and not sticky
    return cudaSuccess;
  }
  return err;
}

}  // namespace

bool PeerMappings::mapAll(const std::vector<PeerLocation>& peers, const std::vector<PublishedBlock>& blocks,
                          std::vector<std::unique_ptr<SysvReleaseBoard>> boards, int myRank, int myDevice,
                          void* myBase, std::vector<void*>* bases, std::string* problem) {
  DeviceGuard guard(myDevice);
  boards_ = std::move(boards);
  boards_.resize(peers.size());
  bases->assign(peers.size(), nullptr);
  for (std::size_t r = 0; r < peers.size(); ++r) {
    const PeerLocation& peer = peers[r];
    if (static_cast<int>(r) == myRank) {
      (*bases)[r] = myBase;
      continue;
    }
    if (!boards_[r] || boards_[r]->retired()) {
      *problem = fmt::format("rank {}: its release board is {}", r, boards_[r] ? "retired" : "not attached");
      unmapAll();
      return false;
    }
    cudaError_t err = cudaSuccess;
    if (peer.sameProcess) {
      err = enablePeerAccess(myDevice, peer.cudaDevice);
      (*bases)[r] = reinterpret_cast<void*>(blocks[r].address);
    } else {
      err = openShared(peer, blocks[r], myDevice, &(*bases)[r]);
      if (err == cudaSuccess) openedHandles_.push_back(keyOf(blocks[r].handle));
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      *problem = fmt::format("rank {}: {}", r, cudaGetErrorString(err));
      unmapAll();
      return false;
    }
  }
  return true;
}

std::vector<BoardPage*> PeerMappings::boardPages() const {
  std::vector<BoardPage*> pages(boards_.size(), nullptr);
  for (std::size_t r = 0; r < boards_.size(); ++r) {
    if (boards_[r]) pages[r] = &boards_[r]->page();
  }
  return pages;
}

void PeerMappings::unmapAll() {
  for (const std::string& key : openedHandles_) closeShared(key);
  openedHandles_.clear();
  boards_.clear();  // only now: the owners count us until our mappings are closed
}

}  // namespace car
