// A CUDA runtime without a GPU, linked into libnccl-car.so in place of libcudart_static for
// the multi-rank shim scenarios (tests/fake_cuda/README.md): the library's host paths
// (handshake, engine, launch, release) run for real on ranks that are threads of one process.
// "Device" memory is host memory; copies and memsets run when they are issued, so a stream
// is idle when asked unless the stand-in NCCL's exchange has an all-gather waiting on it;
// kernels launch as no-ops (the library's `released:` line counts the calls it took). It defines every runtime
// symbol our objects reference, so the linker takes nothing from libcudart_static: a symbol
// missing here fails the link of the fake-CUDA library (duplicate or undefined symbols).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include <dlfcn.h>
#include <strings.h>

#include <thread>
#include <utility>

namespace {

constexpr int kComputeMajor = 9;
constexpr int kComputeMinor = 0;
constexpr int kMultiprocessors = 132;
constexpr std::size_t kAlignment = 4096;

struct Allocation {
  std::size_t bytes;
  int device;
  bool host;
};

struct FakeStream {
  int device;
  unsigned long long id;
};

struct FakeEvent {
  int device;
};

std::mutex gMutex;
std::map<const char*, Allocation>& allocations() {
  static auto* live = new std::map<const char*, Allocation>();  // outlives static destruction
  return *live;
}
// Live streams and live events, each kind its own set: a handle of one kind is never taken
// for the other.
template <typename Fake>
std::set<const void*>& liveHandles() {
  static auto* live = new std::set<const void*>();
  return *live;
}
std::atomic<unsigned long long> gNextStreamId{100};

thread_local int tDevice = 0;
thread_local cudaError_t tLastError = cudaSuccess;

int deviceCount() {
  const char* text = std::getenv("FAKE_CUDA_DEVICES");
  const int count = text != nullptr ? std::atoi(text) : 1;
  return count > 0 ? count : 1;
}

cudaError_t fail(cudaError_t err) {
  tLastError = err;
  return err;
}

bool validDevice(int device) { return device >= 0 && device < deviceCount(); }

// The stream arguments CUDA accepts: the legacy and per-thread streams, and live ones of ours.
bool validStream(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return true;
  std::lock_guard<std::mutex> lock(gMutex);
  return liveHandles<FakeStream>().count(stream) != 0;
}

bool liveEvent(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(gMutex);
  return event != nullptr && liveHandles<FakeEvent>().count(event) != 0;
}

template <typename Handle, typename Fake>
cudaError_t createHandle(Handle* out, const Fake& value) {
  if (out == nullptr) return fail(cudaErrorInvalidValue);
  auto* made = new Fake(value);
  std::lock_guard<std::mutex> lock(gMutex);
  liveHandles<Fake>().insert(made);
  *out = reinterpret_cast<Handle>(made);
  return cudaSuccess;
}

template <typename Fake>
cudaError_t destroyHandle(const void* handle) {
  {
    std::lock_guard<std::mutex> lock(gMutex);
    if (handle == nullptr || liveHandles<Fake>().erase(handle) == 0) return fail(cudaErrorInvalidResourceHandle);
  }
  delete static_cast<const Fake*>(handle);
  return cudaSuccess;
}

void busIdOf(int device, char* out, std::size_t length) {
  std::snprintf(out, length, "00000000:%02X:00.0", 0x18 + device);
}

void* allocate(std::size_t bytes, bool host) {
  void* pointer = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (pointer == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(gMutex);
  allocations()[static_cast<const char*>(pointer)] = Allocation{bytes, tDevice, host};
  return pointer;
}

cudaError_t release(void* pointer, bool host) {
  if (pointer == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = allocations().find(static_cast<const char*>(pointer));
    if (it == allocations().end() || it->second.host != host) return fail(cudaErrorInvalidValue);
    allocations().erase(it);
  }
  std::free(pointer);
  return cudaSuccess;
}

// The stand-in NCCL's all-gathers are work on their stream until every rank has issued its
// own (tests/shim/standin_exchange.cc); it says which streams still wait. Without the
// stand-in's exchange nothing is ever pending.
bool ncclWorkPending(cudaStream_t stream) {
  using Busy = int (*)(cudaStream_t);
  static const Busy busy = reinterpret_cast<Busy>(dlsym(RTLD_DEFAULT, "standinStreamBusy"));
  return busy != nullptr && busy(stream) != 0;
}

cudaError_t launch(cudaStream_t stream) {
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaGetLastError() {
  const cudaError_t err = tLastError;
  tLastError = cudaSuccess;
  return err;
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error (fake CUDA)";
    case cudaErrorInvalidValue: return "invalid argument (fake CUDA)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (fake CUDA)";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle (fake CUDA)";
    case cudaErrorMemoryAllocation: return "out of memory (fake CUDA)";
    case cudaErrorMapBufferObjectFailed: return "mapping of buffer object failed (fake CUDA)";
    default: return "unknown error (fake CUDA)";
  }
}

const char* cudaGetErrorName(cudaError_t) { return "cudaErrorFake"; }

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char*, void** function, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  // No driver: the library keeps the runtime's form of every call.
  if (function != nullptr) *function = nullptr;
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!validDevice(device)) return fail(cudaErrorInvalidDevice);
  tDevice = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = tDevice;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (value == nullptr || !validDevice(device)) return fail(cudaErrorInvalidValue);
  switch (attribute) {
    case cudaDevAttrComputeCapabilityMajor: *value = kComputeMajor; break;
    case cudaDevAttrComputeCapabilityMinor: *value = kComputeMinor; break;
    case cudaDevAttrMultiProcessorCount: *value = kMultiprocessors; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  if (properties == nullptr || !validDevice(device)) return fail(cudaErrorInvalidValue);
  *properties = cudaDeviceProp{};
  std::snprintf(properties->name, sizeof(properties->name), "fake CUDA device %d", device);
  properties->major = kComputeMajor;
  properties->minor = kComputeMinor;
  properties->multiProcessorCount = kMultiprocessors;
  properties->maxThreadsPerBlock = 1024;
  properties->warpSize = 32;
  properties->totalGlobalMem = std::size_t{80} << 30;
  properties->pciBusID = 0x18 + device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* busId, int length, int device) {
  if (busId == nullptr || length <= 0 || !validDevice(device)) return fail(cudaErrorInvalidValue);
  busIdOf(device, busId, static_cast<std::size_t>(length));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* busId) {
  if (device == nullptr || busId == nullptr) return fail(cudaErrorInvalidValue);
  for (int d = 0; d < deviceCount(); ++d) {
    char mine[32];
    busIdOf(d, mine, sizeof(mine));
    if (strcasecmp(mine, busId) == 0) {
      *device = d;
      return cudaSuccess;
    }
  }
  return fail(cudaErrorInvalidDevice);
}

cudaError_t cudaDeviceCanAccessPeer(int* canAccess, int device, int peer) {
  if (canAccess == nullptr || !validDevice(device) || !validDevice(peer)) return fail(cudaErrorInvalidDevice);
  *canAccess = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int) {
  return validDevice(peer) ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  if (pointer == nullptr) return fail(cudaErrorInvalidValue);
  *pointer = allocate(bytes, false);
  return *pointer != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* pointer) { return release(pointer, false); }

cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int) {
  if (pointer == nullptr) return fail(cudaErrorInvalidValue);
  *pointer = allocate(bytes, true);
  return *pointer != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void* pointer) { return release(pointer, true); }

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* pointer) {
  if (attributes == nullptr) return fail(cudaErrorInvalidValue);
  *attributes = cudaPointerAttributes{};
  attributes->type = cudaMemoryTypeUnregistered;
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = allocations().upper_bound(static_cast<const char*>(pointer));
  if (it == allocations().begin()) return cudaSuccess;
  --it;
  if (static_cast<const char*>(pointer) >= it->first + it->second.bytes) return cudaSuccess;
  attributes->type = it->second.host ? cudaMemoryTypeHost : cudaMemoryTypeDevice;
  attributes->device = it->second.device;
  attributes->devicePointer = const_cast<void*>(pointer);
  attributes->hostPointer = it->second.host ? const_cast<void*>(pointer) : nullptr;
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* destination, const void* source, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (bytes != 0 && (destination == nullptr || source == nullptr)) return fail(cudaErrorInvalidValue);
  std::memmove(destination, source, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* destination, int value, size_t bytes, cudaStream_t stream) {
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (bytes != 0 && destination == nullptr) return fail(cudaErrorInvalidValue);
  std::memset(destination, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  return createHandle(stream, FakeStream{tDevice, gNextStreamId.fetch_add(1)});
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) { return destroyHandle<FakeStream>(stream); }

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return ncclWorkPending(stream) ? fail(cudaErrorNotReady) : cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  while (ncclWorkPending(stream)) std::this_thread::yield();
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr) return fail(cudaErrorInvalidValue);
  static thread_local cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
  std::swap(current, *mode);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaStreamGetId(cudaStream_t stream, unsigned long long* id) {
  if (id == nullptr) return fail(cudaErrorInvalidValue);
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (stream == nullptr || stream == cudaStreamLegacy) {
    *id = 1;
  } else if (stream == cudaStreamPerThread) {
    *id = 2;
  } else {
    *id = reinterpret_cast<FakeStream*>(stream)->id;
  }
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (!validStream(stream) || !liveEvent(event)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return createHandle(event, FakeEvent{tDevice}); }

cudaError_t cudaEventDestroy(cudaEvent_t event) { return destroyHandle<FakeEvent>(event); }

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!liveEvent(event) || !validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return liveEvent(event) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) { return cudaEventQuery(event); }

// One process: a handle names an allocation of this process, which the library maps by
// address (same-process peers) and never opens; another process's handle cannot be opened.
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* pointer) {
  if (handle == nullptr || pointer == nullptr) return fail(cudaErrorInvalidValue);
  *handle = cudaIpcMemHandle_t{};
  std::memcpy(handle->reserved, &pointer, sizeof(pointer));
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void**, cudaIpcMemHandle_t, unsigned int) {
  return fail(cudaErrorMapBufferObjectFailed);
}

cudaError_t cudaIpcCloseMemHandle(void*) { return fail(cudaErrorInvalidValue); }

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* function) {
  if (attributes == nullptr || function == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  *attributes = cudaFuncAttributes{};
  attributes->maxThreadsPerBlock = 1024;
  attributes->numRegs = 32;
  attributes->binaryVersion = kComputeMajor * 10 + kComputeMinor;
  attributes->ptxVersion = attributes->binaryVersion;
  return cudaSuccess;
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t*, const void*) { return fail(cudaErrorInvalidDeviceFunction); }

cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t stream) { return launch(stream); }

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void*, void**) {
  if (config == nullptr) return fail(cudaErrorInvalidValue);
  return launch(config->stream);
}

// What nvcc's host stubs call: registration at load, and the <<<>>> launch.
void** __cudaRegisterFatBinary(void* fatCubin) {
  static void* handle = nullptr;
  (void)fatCubin;
  return &handle;
}

void __cudaRegisterFatBinaryEnd(void**) {}

void __cudaUnregisterFatBinary(void**) {}

void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*, int*) {}

void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}

thread_local cudaStream_t tConfiguredStream = nullptr;

unsigned __cudaPushCallConfiguration(dim3, dim3, size_t, void* stream) {
  tConfiguredStream = static_cast<cudaStream_t>(stream);
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* sharedMemory, void* stream) {
  if (grid != nullptr) *grid = dim3();
  if (block != nullptr) *block = dim3();
  if (sharedMemory != nullptr) *sharedMemory = 0;
  if (stream != nullptr) *static_cast<cudaStream_t*>(stream) = tConfiguredStream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* function) {
  if (kernel == nullptr) return fail(cudaErrorInvalidValue);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(function));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t stream) { return launch(stream); }

}  // extern "C"
