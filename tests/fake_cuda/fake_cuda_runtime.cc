// A CUDA runtime without a GPU, linked into libnccl-car.so in place of libcudart_static for
// the multi-rank shim scenarios (tests/fake_cuda/README.md): the library's host paths
// (handshake, engine, launch, release) run for real on ranks that are threads of one process.
// "Device" memory is host memory; copies and memsets run when they are issued, so a stream
// is idle when asked unless the stand-in NCCL's exchange has an all-gather waiting on it;
// kernels launch as no-ops (the library's `released:` line counts the calls it took). It defines every runtime
// symbol our objects reference, so the linker takes nothing from libcudart_static: a symbol
// missing here fails the link of the fake-CUDA library (duplicate or undefined symbols).
//
// It also watches the library's use of CUDA, and reports what breaks a rule, each as one
// stderr line starting with "fake-cuda: VIOLATION <kind>:" (counted; the total is printed at
// exit as "fake-cuda: violations=N"):
//  - launch-sequence, launch-count: our collective kernels' launches (cudaLaunchKernelExC, its
//    one argument a car::LaunchArgs) are recorded per communicator, keyed by rank 0's Signal
//    address (every rank of a communicator maps rank 0's block, and the ranks here are threads
//    of one process, so it is one address on every rank) and the rank count. The k-th launch of
//    each rank must be the same (algorithm, type, op, bytes) as every other rank's k-th, and at
//    exit every rank must have made as many: a call taken on one rank and forwarded on another
//    shows as two sequences that differ;
//  - late-call: the runtime registers its tear-down at exit at its first call, as the real one
//    does (so it runs after any exit handler the library registers later); a call after that
//    tear-down began, from a thread other than the exiting one, is reported. The tear-down
//    waits (up to FAKE_CUDA_EXIT_WAIT_MS, default 300) for every other thread that ever called
//    it to end, so that a late call is seen rather than cut off by the process's end;
//  - device-wide-wait: cudaFree, cudaFreeHost, cudaDeviceSynchronize and cudaStreamSynchronize
//    of the legacy stream wait for the whole device; made from a thread that is not the
//    library's (whose name does not start with "car-"), that is from a program's thread inside
//    one of our hooks (the program never calls this runtime, which is private to the library).
// At exit it also prints what is still alive: "fake-cuda: at exit: streams=S events=E
// device-allocations=D host-allocations=H".
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <pthread.h>
#include <strings.h>
#include <unistd.h>

#include <thread>
#include <utility>

#include "all_reduce.h"

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

// ---- What the library does with CUDA, watched.

std::atomic<int> gViolations{0};

void violation(const char* kind, const std::string& text) {
  ++gViolations;
  const std::string line = std::string("fake-cuda: VIOLATION ") + kind + ": " + text + "\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, line.data(), line.size());
}

std::string threadName() {
  char name[32] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return "?";
  return name;
}

bool onLibraryThread() { return threadName().rfind("car-", 0) == 0; }

// Threads that called this runtime and have not ended yet (each counted once, by a
// thread_local mark), for the tear-down's wait.
struct Threads {
  std::mutex mutex;
  std::condition_variable ended;
  int alive = 0;
};
Threads& threads() {
  static auto* all = new Threads();  // outlives static destruction
  return *all;
}

thread_local bool tMarked = false;     // this thread has a ThreadMark (or had one)
thread_local bool tMarkAlive = false;  // ...not destroyed yet (a thread's marks go before exit handlers run)
thread_local bool tExiting = false;    // the thread that runs the tear-down

struct ThreadMark {
  ThreadMark() {
    tMarkAlive = true;
    std::lock_guard<std::mutex> lock(threads().mutex);
    ++threads().alive;
  }
  ~ThreadMark() {
    tMarkAlive = false;
    std::lock_guard<std::mutex> lock(threads().mutex);
    --threads().alive;
    threads().ended.notify_all();
  }
};

std::atomic<bool> gTornDown{false};

void checkLaunchCounts();

int exitWaitMs() {
  const char* text = std::getenv("FAKE_CUDA_EXIT_WAIT_MS");
  return text != nullptr ? std::atoi(text) : 300;
}

// At exit, after every exit handler registered after the runtime's first call.
void tearDown() {
  tExiting = true;
  gTornDown.store(true);
  // Every other thread that used the runtime gets a moment to end (or to make a late call).
  {
    std::unique_lock<std::mutex> lock(threads().mutex);
    const int self = tMarkAlive ? 1 : 0;
    threads().ended.wait_for(lock, std::chrono::milliseconds(exitWaitMs()), [&] { return threads().alive <= self; });
  }
  checkLaunchCounts();
  std::size_t deviceAllocations = 0, hostAllocations = 0, streams = 0, events = 0;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    for (const auto& entry : allocations()) (entry.second.host ? hostAllocations : deviceAllocations) += 1;
    streams = liveHandles<FakeStream>().size();
    events = liveHandles<FakeEvent>().size();
  }
  std::fprintf(stderr, "fake-cuda: at exit: streams=%zu events=%zu device-allocations=%zu host-allocations=%zu\n",
               streams, events, deviceAllocations, hostAllocations);
  std::fprintf(stderr, "fake-cuda: violations=%d\n", gViolations.load());
  std::fflush(stderr);
}

// At the top of every function of the runtime.
void enter(const char* function) {
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(&tearDown); });
  if (!tMarked) {
    tMarked = true;
    static thread_local ThreadMark mark;
  }
  if (gTornDown.load() && !tExiting) {
    violation("late-call", std::string(function) + " from thread " + threadName() +
                               " after the runtime's tear-down at exit began");
  }
}

// A call that waits for the whole device.
void deviceWide(const char* what) {
  if (!onLibraryThread()) violation("device-wide-wait", std::string(what) + " on thread " + threadName() +
                                                            ", a thread of the program's");
}

bool legacy(cudaStream_t stream) { return stream == nullptr || stream == cudaStreamLegacy; }

// Our collective kernels' launches, per communicator (rank 0's Signal, rank count).
struct Launch {
  int algorithm, type, op;
  long long bytes;
  bool operator==(const Launch& other) const {
    return algorithm == other.algorithm && type == other.type && op == other.op && bytes == other.bytes;
  }
};

std::string describeLaunch(const Launch& launch) {
  return "algorithm=" + std::to_string(launch.algorithm) + " type=" + std::to_string(launch.type) +
         " op=" + std::to_string(launch.op) + " bytes=" + std::to_string(launch.bytes);
}

struct LaunchSequence {
  std::vector<Launch> launches;  // the k-th, as the first rank to make it made it
  std::vector<int> firstBy;
  std::vector<std::uint64_t> made;  // by rank
};

std::mutex gLaunchMutex;
std::map<std::pair<const void*, int>, LaunchSequence>& launchSequences() {
  static auto* all = new std::map<std::pair<const void*, int>, LaunchSequence>();
  return *all;
}

void recordLaunch(const car::LaunchArgs& args) {
  if (args.ranks < 1 || args.rank < 0 || args.rank >= args.ranks) return;
  const Launch launch{static_cast<int>(args.algorithm), static_cast<int>(args.type), static_cast<int>(args.op),
                      args.bytes};
  const void* key = args.peers.signals[0];
  std::string mismatch;
  {
    std::lock_guard<std::mutex> lock(gLaunchMutex);
    LaunchSequence& sequence = launchSequences()[{key, args.ranks}];
    sequence.made.resize(static_cast<std::size_t>(args.ranks), 0);
    const std::uint64_t index = sequence.made[static_cast<std::size_t>(args.rank)]++;
    if (index >= sequence.launches.size()) {
      sequence.launches.push_back(launch);
      sequence.firstBy.push_back(args.rank);
      return;
    }
    if (sequence.launches[index] == launch) return;
    char head[128];
    std::snprintf(head, sizeof(head), "communicator %p/%d rank %d launch %llu is ", key, args.ranks, args.rank,
                  static_cast<unsigned long long>(index));
    mismatch = head + describeLaunch(launch) + ", but rank " + std::to_string(sequence.firstBy[index]) +
               "'s is " + describeLaunch(sequence.launches[index]);
  }
  violation("launch-sequence", mismatch);
}

void checkLaunchCounts() {
  std::vector<std::string> unequal;
  {
    std::lock_guard<std::mutex> lock(gLaunchMutex);
    for (const auto& [key, sequence] : launchSequences()) {
      bool same = true;
      std::string counts;
      for (std::size_t r = 0; r < sequence.made.size(); ++r) {
        same = same && sequence.made[r] == sequence.made[0];
        counts += (r == 0 ? "" : ",") + std::to_string(sequence.made[r]);
      }
      if (same) continue;
      char head[96];
      std::snprintf(head, sizeof(head), "communicator %p/%d: ranks launched ", key.first, key.second);
      unequal.push_back(head + counts + " kernels");
    }
  }
  for (const std::string& text : unequal) violation("launch-count", text);
}

}  // namespace

extern "C" {

cudaError_t cudaGetLastError() {
  enter("cudaGetLastError");
  const cudaError_t err = tLastError;
  tLastError = cudaSuccess;
  return err;
}

const char* cudaGetErrorString(cudaError_t error) {
  enter("cudaGetErrorString");
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
  enter("cudaDriverGetVersion");
  if (version == nullptr) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char*, void** function, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  enter("cudaGetDriverEntryPointByVersion");
  // No driver: the library keeps the runtime's form of every call.
  if (function != nullptr) *function = nullptr;
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  enter("cudaSetDevice");
  if (!validDevice(device)) return fail(cudaErrorInvalidDevice);
  tDevice = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  enter("cudaGetDevice");
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = tDevice;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  enter("cudaDeviceSynchronize");
  deviceWide("cudaDeviceSynchronize");
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  enter("cudaDeviceGetAttribute");
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
  enter("cudaGetDeviceProperties");
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
  enter("cudaDeviceGetPCIBusId");
  if (busId == nullptr || length <= 0 || !validDevice(device)) return fail(cudaErrorInvalidValue);
  busIdOf(device, busId, static_cast<std::size_t>(length));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* busId) {
  enter("cudaDeviceGetByPCIBusId");
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
  enter("cudaDeviceCanAccessPeer");
  if (canAccess == nullptr || !validDevice(device) || !validDevice(peer)) return fail(cudaErrorInvalidDevice);
  *canAccess = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int) {
  enter("cudaDeviceEnablePeerAccess");
  return validDevice(peer) ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  enter("cudaMalloc");
  if (pointer == nullptr) return fail(cudaErrorInvalidValue);
  *pointer = allocate(bytes, false);
  return *pointer != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* pointer) {
  enter("cudaFree");
  if (pointer != nullptr) deviceWide("cudaFree");
  return release(pointer, false);
}

cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int) {
  enter("cudaHostAlloc");
  if (pointer == nullptr) return fail(cudaErrorInvalidValue);
  *pointer = allocate(bytes, true);
  return *pointer != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void* pointer) {
  enter("cudaFreeHost");
  if (pointer != nullptr) deviceWide("cudaFreeHost");
  return release(pointer, true);
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* pointer) {
  enter("cudaPointerGetAttributes");
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
  enter("cudaMemcpyAsync");
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (bytes != 0 && (destination == nullptr || source == nullptr)) return fail(cudaErrorInvalidValue);
  std::memmove(destination, source, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* destination, int value, size_t bytes, cudaStream_t stream) {
  enter("cudaMemsetAsync");
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (bytes != 0 && destination == nullptr) return fail(cudaErrorInvalidValue);
  std::memset(destination, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  enter("cudaStreamCreateWithFlags");
  return createHandle(stream, FakeStream{tDevice, gNextStreamId.fetch_add(1)});
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  enter("cudaStreamDestroy");
  return destroyHandle<FakeStream>(stream);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  enter("cudaStreamQuery");
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return ncclWorkPending(stream) ? fail(cudaErrorNotReady) : cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  enter("cudaStreamSynchronize");
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  if (legacy(stream)) deviceWide("cudaStreamSynchronize of the legacy stream");
  while (ncclWorkPending(stream)) std::this_thread::yield();
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  enter("cudaThreadExchangeStreamCaptureMode");
  if (mode == nullptr) return fail(cudaErrorInvalidValue);
  static thread_local cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
  std::swap(current, *mode);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  enter("cudaStreamIsCapturing");
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  if (!validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaStreamGetId(cudaStream_t stream, unsigned long long* id) {
  enter("cudaStreamGetId");
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
  enter("cudaStreamWaitEvent");
  if (!validStream(stream) || !liveEvent(event)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  enter("cudaEventCreateWithFlags");
  return createHandle(event, FakeEvent{tDevice});
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  enter("cudaEventDestroy");
  return destroyHandle<FakeEvent>(event);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  enter("cudaEventRecord");
  if (!liveEvent(event) || !validStream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  enter("cudaEventQuery");
  return liveEvent(event) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  enter("cudaEventSynchronize");
  return cudaEventQuery(event);
}

// One process: a handle names an allocation of this process, which the library maps by
// address (same-process peers) and never opens; another process's handle cannot be opened.
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* pointer) {
  enter("cudaIpcGetMemHandle");
  if (handle == nullptr || pointer == nullptr) return fail(cudaErrorInvalidValue);
  *handle = cudaIpcMemHandle_t{};
  std::memcpy(handle->reserved, &pointer, sizeof(pointer));
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void**, cudaIpcMemHandle_t, unsigned int) {
  enter("cudaIpcOpenMemHandle");
  return fail(cudaErrorMapBufferObjectFailed);
}

cudaError_t cudaIpcCloseMemHandle(void*) {
  enter("cudaIpcCloseMemHandle");
  return fail(cudaErrorInvalidValue);
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* function) {
  enter("cudaFuncGetAttributes");
  if (attributes == nullptr || function == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  *attributes = cudaFuncAttributes{};
  attributes->maxThreadsPerBlock = 1024;
  attributes->numRegs = 32;
  attributes->binaryVersion = kComputeMajor * 10 + kComputeMinor;
  attributes->ptxVersion = attributes->binaryVersion;
  return cudaSuccess;
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t*, const void*) {
  enter("cudaGetFuncBySymbol");
  return fail(cudaErrorInvalidDeviceFunction);
}

cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t stream) {
  enter("cudaLaunchKernel");
  return launch(stream);
}

// Only our collective kernels are launched this way (kernels/dispatch.cuh: launchGrid), each
// with one argument, its LaunchArgs.
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void*, void** args) {
  enter("cudaLaunchKernelExC");
  if (config == nullptr) return fail(cudaErrorInvalidValue);
  const cudaError_t err = launch(config->stream);
  if (err == cudaSuccess && args != nullptr && args[0] != nullptr) {
    recordLaunch(*static_cast<const car::LaunchArgs*>(args[0]));
  }
  return err;
}

// What nvcc's host stubs call: registration at load, and the <<<>>> launch.
void** __cudaRegisterFatBinary(void* fatCubin) {
  enter("__cudaRegisterFatBinary");
  static void* handle = nullptr;
  (void)fatCubin;
  return &handle;
}

void __cudaRegisterFatBinaryEnd(void**) {
  enter("__cudaRegisterFatBinaryEnd");
}

void __cudaUnregisterFatBinary(void**) {
  enter("__cudaUnregisterFatBinary");
}

void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*, int*) {
  enter("__cudaRegisterFunction");
}

void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {
  enter("__cudaRegisterVar");
}

thread_local cudaStream_t tConfiguredStream = nullptr;

unsigned __cudaPushCallConfiguration(dim3, dim3, size_t, void* stream) {
  enter("__cudaPushCallConfiguration");
  tConfiguredStream = static_cast<cudaStream_t>(stream);
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* sharedMemory, void* stream) {
  enter("__cudaPopCallConfiguration");
  if (grid != nullptr) *grid = dim3();
  if (block != nullptr) *block = dim3();
  if (sharedMemory != nullptr) *sharedMemory = 0;
  if (stream != nullptr) *static_cast<cudaStream_t*>(stream) = tConfiguredStream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* function) {
  enter("__cudaGetKernel");
  if (kernel == nullptr) return fail(cudaErrorInvalidValue);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(function));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t stream) {
  enter("__cudaLaunchKernel");
  return launch(stream);
}

}  // extern "C"
