// The CUDA side of the set-up's exchange (shim/handshake/handshake_exchange.h). Everything runs
// on the handshake's own non-blocking stream and waits for that stream alone: a plain
// cudaMemcpy, a memset on the legacy stream or a cudaFree would also wait for the caller's
// streams or the whole device, where one of our kernels may wait for this very peer.
#include <map>
#include <mutex>
#include <vector>

#include "device_guard.h"
#include "handshake/handshake_exchange.h"

namespace car {
namespace {

class CudaHandshakeDevice final : public HandshakeDevice {
 public:
  bool stage(ExchangeMember& member, std::size_t offset, const void* data, std::size_t bytes, std::size_t clearOffset,
             std::size_t clearBytes) override {
    DeviceGuard guard(member.comm->device());
    const bool ok = guard.error() == cudaSuccess &&
                    cudaMemcpyAsync(member.scratch + offset, data, bytes, cudaMemcpyHostToDevice, member.stream) ==
                        cudaSuccess &&
                    cudaMemsetAsync(member.scratch + clearOffset, 0, clearBytes, member.stream) == cudaSuccess &&
                    cudaStreamSynchronize(member.stream) == cudaSuccess;
    if (!ok) cudaGetLastError();
    return ok;
  }

  StreamState query(ExchangeMember& member) override {
    DeviceGuard guard(member.comm->device());
    const cudaError_t err = cudaStreamQuery(member.stream);
    if (err == cudaSuccess) return StreamState::Idle;
    cudaGetLastError();
    return err == cudaErrorNotReady ? StreamState::Busy : StreamState::Failed;
  }

  bool readBack(ExchangeMember& member, std::size_t offset, void* out, std::size_t bytes) override {
    DeviceGuard guard(member.comm->device());
    const bool ok = guard.error() == cudaSuccess &&
                    cudaMemcpyAsync(out, member.scratch + offset, bytes, cudaMemcpyDeviceToHost, member.stream) ==
                        cudaSuccess &&
                    cudaStreamSynchronize(member.stream) == cudaSuccess;
    if (!ok) cudaGetLastError();
    return ok;
  }
};

std::mutex gScratchMutex;
std::map<int, std::vector<char*>>& freeScratch() {
  static auto* pool = new std::map<int, std::vector<char*>>();  // outlives static destruction
  return *pool;
}

}  // namespace

HandshakeDevice& cudaHandshakeDevice() {
  static auto* device = new CudaHandshakeDevice();
  return *device;
}

char* takeScratch(int device) {
  {
    std::lock_guard<std::mutex> lock(gScratchMutex);
    std::vector<char*>& pool = freeScratch()[device];
    if (!pool.empty()) {
      char* scratch = pool.back();
      pool.pop_back();
      return scratch;
    }
  }
  DeviceGuard guard(device);
  void* scratch = nullptr;
  if (guard.error() != cudaSuccess || cudaMalloc(&scratch, ScratchLayout::forRanks(kMaxRanks).bytes) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return static_cast<char*>(scratch);
}

void returnScratch(int device, char* scratch) {
  std::lock_guard<std::mutex> lock(gScratchMutex);
  freeScratch()[device].push_back(scratch);
}

}  // namespace car
