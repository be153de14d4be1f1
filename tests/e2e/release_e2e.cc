// When our buffer blocks are freed, through the real NCCL (run_e2e.py, release-* scenarios):
// never while a peer still maps them, and never with a destroy that waits for long.
//
//   release_e2e processes RANK ID_FILE [DEVICE]
//     Two processes. Rank 1 destroys a communicator 1 s after rank 0 (rank 0 waits for it,
//     then frees), then 4 s after (rank 0 keeps its block, freed by a later release), then
//     joins an all-reduce 3 s after rank 0 aborted it (rank 0's block must still exist).
//   release_e2e initall NDEV
//     One process, NDEV GPUs (ncclCommInitAll): destroys and aborts from one thread never
//     wait for ranks of the same process, and every block is freed by the last release.
//   release_e2e devices RANK NPROCS ID_FILE CYCLES DEV0,DEV1,...
//     NPROCS processes, each driving several GPUs from one thread (nccl-tests -g N): CYCLES
//     split/all-reduce/destroy cycles must leave device memory, files and mappings where
//     they were; our mappings are closed on the device that opened them.
// Every all-reduce that completes has inputs that differ by rank and is checked; processes
// and initall end with "<who>: N all-reduces (M checked), W wrong", the count the runner
// compares with the calls the library's log says it took. Prints "<what>: PASS|FAIL ..."
// lines; exits 0 when all pass.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/process_counts.h"
#include "unique_id_file.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kCount = 1 << 16;  // 256 KiB of fp32: taken by our kernels

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
void sleepSeconds(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

int gFailures = 0;

// This process's all-reduces: made, checked (completed, result compared) and wrong.
struct CallCounts {
  int made = 0;
  int checked = 0;
  int wrong = 0;
};
CallCounts gCalls;

// Rank r's input at element i: small integers, exact in any order of the sum.
float inputValue(int rank, std::size_t i) { return static_cast<float>(static_cast<int>((i * 7 + rank * 3) % 17) - 8); }

// Fills `count` floats at `buffer` with rank `rank`'s input, on `stream`.
bool fillInput(float* buffer, std::size_t count, int rank, cudaStream_t stream) {
  std::vector<float> host(count);
  for (std::size_t i = 0; i < count; ++i) host[i] = inputValue(rank, i);
  return cudaMemcpyAsync(buffer, host.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream) == cudaSuccess &&
         cudaStreamSynchronize(stream) == cudaSuccess;
}

// Counts a completed in-place all-reduce of `ranks` ranks' inputs: checked, and wrong unless
// every element holds the sum.
void checkSum(const float* buffer, std::size_t count, int ranks) {
  std::vector<float> host(count);
  ++gCalls.checked;
  bool right = cudaMemcpy(host.data(), buffer, count * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
  for (std::size_t i = 0; right && i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < ranks; ++r) expected += inputValue(r, i);
    right = host[i] == expected;
  }
  if (!right) ++gCalls.wrong;
}

void reportCalls(const std::string& who) {
  std::printf("%s: %d all-reduces (%d checked), %d wrong\n", who.c_str(), gCalls.made, gCalls.checked, gCalls.wrong);
  std::fflush(stdout);
  if (gCalls.wrong != 0) ++gFailures;
}

void report(const std::string& what, bool pass, const std::string& detail) {
  std::printf("%s: %s %s\n", what.c_str(), pass ? "PASS" : "FAIL", detail.c_str());
  std::fflush(stdout);
  if (!pass) ++gFailures;
}

std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f s", value);
  return text;
}

bool idleWithin(cudaStream_t stream, double limit) {
  const Clock::time_point start = Clock::now();
  while (cudaStreamQuery(stream) == cudaErrorNotReady) {
    if (since(start) > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

struct Pair {
  int rank = 0;
  ncclComm_t parent = nullptr;
  cudaStream_t stream = nullptr;
  float* buffer = nullptr;
};

// An in-place all-reduce of `count` floats of this rank's input on `comm`, waited for and
// checked.
bool allReduceChecked(Pair& self, ncclComm_t comm, std::size_t count) {
  if (!fillInput(self.buffer, count, self.rank, self.stream)) return false;
  ++gCalls.made;
  if (ncclAllReduce(self.buffer, self.buffer, count, ncclFloat32, ncclSum, comm, self.stream) != ncclSuccess ||
      cudaStreamSynchronize(self.stream) != cudaSuccess) {
    return false;
  }
  checkSum(self.buffer, count, 2);
  return true;
}

// Both ranks here: a 4-byte all-reduce on the parent, then wait for it.
bool meet(Pair& self) { return allReduceChecked(self, self.parent, 1); }

ncclComm_t child(Pair& self) {
  ncclComm_t comm = nullptr;
  return ncclCommSplit(self.parent, 0, self.rank, &comm, nullptr) == ncclSuccess ? comm : nullptr;
}

// One all-reduce our kernel takes, completed; then rank 1 lets go `delay` after rank 0.
double destroyAfter(Pair& self, double delay) {
  ncclComm_t comm = child(self);
  if (comm == nullptr || !allReduceChecked(self, comm, kCount)) return -1;
  if (self.rank == 1) sleepSeconds(delay);
  const Clock::time_point start = Clock::now();
  ncclCommDestroy(comm);
  const double took = since(start);
  return meet(self) ? took : -1;
}

// A communicator made and destroyed: its release frees what earlier releases kept.
bool sweep(Pair& self) {
  ncclComm_t comm = child(self);
  return comm != nullptr && ncclCommDestroy(comm) == ncclSuccess && meet(self);
}

int processes(int rank, const char* idFile) {
  Pair self;
  self.rank = rank;
  ncclUniqueId id{};
  if (!shareUniqueIdThroughFile(rank, idFile, &id) || ncclCommInitRank(&self.parent, 2, id, rank) != ncclSuccess ||
      cudaMalloc(&self.buffer, kCount * sizeof(float)) != cudaSuccess ||
      cudaMemset(self.buffer, 0, kCount * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&self.stream, cudaStreamNonBlocking) != cudaSuccess) {
    report("set-up", false, "");
    return 1;
  }
  const std::string who = "rank " + std::to_string(rank) + ": ";

  // Rank 1 closes its mapping 1 s after rank 0's destroy began: rank 0 waits for it (its
  // log says so: the runner checks the lines, the times here are bounds only).
  const double waited = destroyAfter(self, 1.0);
  report(who + "destroy with a peer 1 s behind", waited >= 0 && waited < 10, seconds(waited));

  // 4 s: rank 0 gives up after 2 s and keeps its block; the next release frees it.
  const double kept = destroyAfter(self, 4.0);
  report(who + "destroy with a peer 4 s behind", kept >= 0 && kept < 10, seconds(kept));
  if (!sweep(self)) report(who + "sweep", false, "");

  // After an abort a peer's kernel still writes into our block: rank 1 joins rank 0's
  // aborted all-reduce 3 s late, then aborts its own.
  ncclComm_t comm = child(self);
  bool ok = comm != nullptr && fillInput(self.buffer, kCount, rank, self.stream);
  if (ok && rank == 1) sleepSeconds(3);
  if (ok) ++gCalls.made;  // its result is undefined (aborted): made, not checked
  ok = ok && ncclAllReduce(self.buffer, self.buffer, kCount, ncclFloat32, ncclSum, comm, self.stream) == ncclSuccess;
  sleepSeconds(rank == 0 ? 0.5 : 2.0);
  const Clock::time_point aborted = Clock::now();
  ncclCommAbort(comm);
  const double abortTook = since(aborted);
  ok = ok && idleWithin(self.stream, 10) && meet(self);
  report(who + "abort with a peer still to come", ok && abortTook < 15, "abort took " + seconds(abortTook));
  if (!sweep(self)) report(who + "sweep", false, "");
  ncclCommDestroy(self.parent);
  reportCalls("rank " + std::to_string(rank));
  return gFailures == 0 ? 0 : 1;
}

struct Device {
  int ordinal = 0;
  cudaStream_t stream = nullptr;
  float* buffer = nullptr;
};

bool prepareDevices(std::vector<Device>* devices) {
  for (Device& device : *devices) {
    if (cudaSetDevice(device.ordinal) != cudaSuccess || cudaMalloc(&device.buffer, kCount * sizeof(float)) != cudaSuccess ||
        cudaMemset(device.buffer, 0, kCount * sizeof(float)) != cudaSuccess ||
        cudaStreamCreateWithFlags(&device.stream, cudaStreamNonBlocking) != cudaSuccess) {
      return false;
    }
  }
  return true;
}

// Each of the first `ranks` of `comms` all-reduces on its device, in one group, from this
// thread.
bool allReduceAll(std::vector<Device>& devices, const std::vector<ncclComm_t>& comms, std::size_t ranks) {
  ncclGroupStart();
  bool ok = true;
  for (std::size_t i = 0; i < ranks; ++i) {
    ok = ok && ncclAllReduce(devices[i].buffer, devices[i].buffer, kCount, ncclFloat32, ncclSum, comms[i],
                             devices[i].stream) == ncclSuccess;
  }
  return ncclGroupEnd() == ncclSuccess && ok;
}

// Device i holds rank i's input (ncclCommInitAll makes device i rank i).
bool fillInputs(std::vector<Device>& devices) {
  bool ok = true;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    ok = ok && cudaSetDevice(devices[i].ordinal) == cudaSuccess &&
         fillInput(devices[i].buffer, kCount, static_cast<int>(i), devices[i].stream);
  }
  return ok;
}

int initAll(int ndev) {
  std::vector<Device> devices(ndev);
  for (int i = 0; i < ndev; ++i) devices[i].ordinal = i;
  if (!prepareDevices(&devices)) {
    report("set-up", false, "");
    return 1;
  }
  std::vector<ncclComm_t> comms(ndev);
  bool ok = ncclCommInitAll(comms.data(), ndev, nullptr) == ncclSuccess && fillInputs(devices) &&
            allReduceAll(devices, comms, ndev);
  gCalls.made += ndev;
  for (Device& device : devices) ok = ok && cudaStreamSynchronize(device.stream) == cudaSuccess;
  for (Device& device : devices) {
    if (ok) checkSum(device.buffer, kCount, ndev);
  }
  double slowest = 0;
  for (ncclComm_t comm : comms) {
    const Clock::time_point start = Clock::now();
    ok = ok && ncclCommDestroy(comm) == ncclSuccess;
    slowest = std::max(slowest, since(start));
  }
  report("initall: destroys from one thread do not wait for each other", ok && slowest < 1.0,
         "slowest " + seconds(slowest));

  // The last rank never joins: every other rank's kernel waits; aborted one after another.
  ok = ncclCommInitAll(comms.data(), ndev, nullptr) == ncclSuccess && allReduceAll(devices, comms, ndev - 1);
  gCalls.made += ndev - 1;
  sleepSeconds(0.5);
  slowest = 0;
  for (ncclComm_t comm : comms) {
    const Clock::time_point start = Clock::now();
    ncclCommAbort(comm);
    slowest = std::max(slowest, since(start));
  }
  for (Device& device : devices) ok = ok && idleWithin(device.stream, 10);
  report("initall: aborts from one thread stop every kernel", ok && slowest < 12, "slowest abort " + seconds(slowest));
  reportCalls("initall");
  return gFailures == 0 ? 0 : 1;
}

struct Usage {
  std::vector<double> freeMiB;
  long fds = 0;
  long mappings = 0;
};

Usage usageNow(const std::vector<Device>& devices) {
  Usage usage;
  for (const Device& device : devices) {
    std::size_t freeBytes = 0, totalBytes = 0;
    cudaSetDevice(device.ordinal);
    cudaMemGetInfo(&freeBytes, &totalBytes);
    usage.freeMiB.push_back(static_cast<double>(freeBytes) / (1 << 20));
  }
  usage.fds = car::testing::openFileDescriptors();
  usage.mappings = car::testing::memoryMappings();
  return usage;
}

int devicesPerProcess(int processRank, int processes, const char* idFile, int cycles, const std::string& list) {
  std::vector<Device> devices;
  std::stringstream ordinals(list);
  for (std::string item; std::getline(ordinals, item, ',');) devices.push_back(Device{std::atoi(item.c_str())});
  const int k = static_cast<int>(devices.size());
  ncclUniqueId id{};
  if (k == 0 || !prepareDevices(&devices) || !shareUniqueIdThroughFile(processRank, idFile, &id)) {
    report("set-up", false, "");
    return 1;
  }
  std::vector<ncclComm_t> parents(k), children(k);
  ncclGroupStart();
  for (int i = 0; i < k; ++i) {
    cudaSetDevice(devices[i].ordinal);
    ncclCommInitRank(&parents[i], processes * k, id, processRank * k + i);
  }
  bool ok = ncclGroupEnd() == ncclSuccess;
  Usage before;
  for (int cycle = 0; ok && cycle < cycles + 3; ++cycle) {
    if (cycle == 3) before = usageNow(devices);
    ncclGroupStart();
    for (int i = 0; i < k; ++i) ncclCommSplit(parents[i], 0, processRank * k + i, &children[i], nullptr);
    ok = ncclGroupEnd() == ncclSuccess && allReduceAll(devices, children, k);
    for (Device& device : devices) ok = ok && cudaStreamSynchronize(device.stream) == cudaSuccess;
    // The current device is the last one, as in a -g N program: each release must switch.
    for (ncclComm_t comm : children) ok = ok && ncclCommDestroy(comm) == ncclSuccess;
  }
  // Every process finished its cycles (its releases closed their mappings of our blocks).
  ok = ok && allReduceAll(devices, parents, k);
  for (Device& device : devices) ok = ok && cudaStreamSynchronize(device.stream) == cudaSuccess;
  sleepSeconds(1);
  const Usage after = usageNow(devices);
  double grown = 0;
  for (int i = 0; i < k; ++i) grown = std::max(grown, before.freeMiB[i] - after.freeMiB[i]);
  const long fds = after.fds - before.fds;
  const long mappings = after.mappings - before.mappings;
  for (ncclComm_t comm : parents) ncclCommDestroy(comm);
  char detail[160];
  std::snprintf(detail, sizeof(detail), "%d cycles on %d GPUs: device memory +%.1f MiB (worst GPU), fds %+ld, mappings %+ld",
                cycles, k, grown, fds, mappings);
  report("process " + std::to_string(processRank) + ": -g " + std::to_string(k) + " life-cycles leave nothing behind",
         ok && grown < 8.0 && fds <= 4 && mappings <= 16, detail);
  return gFailures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "processes" && argc >= 4) {
    if (cudaSetDevice(argc > 4 ? std::atoi(argv[4]) : 0) != cudaSuccess) return 2;
    return processes(std::atoi(argv[2]), argv[3]);
  }
  if (mode == "initall" && argc >= 3) return initAll(std::atoi(argv[2]));
  if (mode == "devices" && argc >= 7) {
    return devicesPerProcess(std::atoi(argv[2]), std::atoi(argv[3]), argv[4], std::atoi(argv[5]), argv[6]);
  }
  std::fprintf(stderr, "usage: release_e2e processes RANK ID_FILE [DEVICE] | initall NDEV | "
                       "devices RANK NPROCS ID_FILE CYCLES DEV0,DEV1,...\n");
  return 2;
}
