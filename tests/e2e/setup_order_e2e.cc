// Our set-up of a communicator must never make the host wait where NCCL would not (issue 24
// item 3), through the real NCCL (tests/e2e/run_e2e.py runs it on one GPU under MPS).
//
//   setup_order_e2e opposite-order RANK NRANKS ID_FILE
//     Two nonblocking communicators, A (unique id in ID_FILE) and B (ID_FILE.b), each with a
//     stream of its own. Their first all-reduces come in opposite orders: A then B on even
//     ranks, B then A on odd ones, the second made before the first is waited for. When a
//     rank waited inside its first all-reduce for our set-up, each rank waited there for a
//     peer that was waiting on the other communicator: a deadlock. Every wait here is bounded
//     (60 s), and a watchdog ends the process (exit 1) if the first all-reduces are not done
//     within 65 s (a call that never returns). Then 200 checked all-reduces on each,
//     alternating, 1 KiB to 1 MiB (ours to take). Prints "rank R: first all-reduces (A then
//     B) done after T s" (or "rank R: FAIL: first all-reduces ... not done ..."), "rank R comm
//     A|B: sums right (N all-reduces, ...)" or "... sums WRONG: <what>", and exits 0 when every
//     sum was right and both destroys succeeded, else 1.
//
//   setup_order_e2e dead-peer RANK NRANKS ID_FILE
//     The last rank creates its communicator through pncclCommInitRank (NCCL's own: nothing
//     of ours runs there), prints "rank R: NCCL's own init (pncclCommInitRank) returned N;
//     leaving without destroying it" and leaves at once with _exit, as a crash would. The
//     others create theirs with ncclCommInitRank (blocking), which must come back although
//     our set-up can never complete (the runner bounds it: NCCL_CAR_SETUP_TIMEOUT_MS), then
//     abort it (the peer is gone: nothing else is safe). Prints "rank R: init returned N
//     after T s" and "rank R: abort returned N after T s"; exits 0 when init returned
//     ncclSuccess. With `first-call` the others make one all-reduce before the abort and print
//     "rank R: first all-reduce returned N after T s": where NCCL alone meets the dead peer.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "unique_id_file.h"

// NCCL's profiling name of ncclCommInitRank. The library exports it as a plain forwarder to
// the real NCCL's, bypassing its hooks; declared here too for an nccl.h that does not.
extern "C" ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

namespace {

using Clock = std::chrono::steady_clock;

// The longest the program waits for anything NCCL or the GPU owes it.
constexpr auto kWait = std::chrono::seconds(60);
// Element counts of fp32, 1 KiB to 1 MiB, some odd: all far under the library's 8 MiB, so
// our kernels take them once the communicator is set up.
constexpr std::size_t kCounts[] = {256, 1000, 4096, 12345, 65536, 100000, 262144};
constexpr std::size_t kSizes = sizeof(kCounts) / sizeof(kCounts[0]);
constexpr std::size_t kMaxCount = 262144;
// Checked all-reduces on each communicator after its first.
constexpr int kCheckedCalls = 200;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void nap() { std::this_thread::sleep_for(std::chrono::microseconds(100)); }

// Polls until the communicator's last operation is no longer in progress (a nonblocking
// communicator's every call may answer ncclInProgress) or `deadline` passes.
ncclResult_t settled(ncclComm_t comm, Clock::time_point deadline) {
  for (;;) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t asked = ncclCommGetAsyncError(comm, &state);
    if (asked != ncclSuccess) return asked;
    if (state != ncclInProgress || Clock::now() > deadline) return state;
    nap();
  }
}

// Whether the stream has finished its work by `deadline` (and without error).
bool idleBy(cudaStream_t stream, Clock::time_point deadline) {
  for (;;) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state == cudaSuccess) return true;
    if (state != cudaErrorNotReady || Clock::now() > deadline) return false;
    nap();
  }
}

// Small integers: their sum is exact in fp32 in any order. `lane` makes the two
// communicators' inputs differ, `call` each call's.
float inputAt(int rank, std::size_t i, int call, int lane) {
  return static_cast<float>(rank + 1 + (i + static_cast<std::size_t>(call) + 3 * static_cast<std::size_t>(lane)) % 7);
}

// One communicator with its stream, its buffers and what went wrong on it.
struct Lane {
  Lane(const char* laneName, int laneIndex) : name(laneName), index(laneIndex) {}

  const char* name;
  int index;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  // Pinned: the copies are really asynchronous, so that every wait is one of ours, bounded.
  float* hostIn = nullptr;
  float* hostOut = nullptr;
  int calls = 0;        // all-reduces compared
  std::string problem;  // the first thing that went wrong; empty while all is right
  bool broken = false;  // NCCL failed or a call never finished: no more calls on it

  bool prepare() {
    return cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
           cudaMalloc(&send, kMaxCount * sizeof(float)) == cudaSuccess &&
           cudaMalloc(&recv, kMaxCount * sizeof(float)) == cudaSuccess &&
           cudaMallocHost(&hostIn, kMaxCount * sizeof(float)) == cudaSuccess &&
           cudaMallocHost(&hostOut, kMaxCount * sizeof(float)) == cudaSuccess;
  }

  void fail(const std::string& what, bool breaks) {
    if (problem.empty()) problem = what;
    broken = broken || breaks;
  }
};

std::string callName(int call, std::size_t count) {
  return "all-reduce " + std::to_string(call) + " (" + std::to_string(count * sizeof(float)) + " bytes)";
}

// Uploads the inputs, poisons the output and makes the all-reduce, all on the lane's stream
// (so ordered with each other); false when NCCL refused it.
bool issue(Lane& lane, int rank, int call, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) lane.hostIn[i] = inputAt(rank, i, call, lane.index);
  if (cudaMemcpyAsync(lane.send, lane.hostIn, count * sizeof(float), cudaMemcpyHostToDevice, lane.stream) !=
          cudaSuccess ||
      cudaMemsetAsync(lane.recv, 0xff, count * sizeof(float), lane.stream) != cudaSuccess) {
    lane.fail(callName(call, count) + ": cannot prepare the buffers", true);
    return false;
  }
  const ncclResult_t result = ncclAllReduce(lane.send, lane.recv, count, ncclFloat32, ncclSum, lane.comm, lane.stream);
  if (result != ncclSuccess && result != ncclInProgress) {
    lane.fail(callName(call, count) + ": ncclAllReduce returned " + std::to_string(result), true);
    return false;
  }
  return true;
}

// Waits (until `deadline`) for NCCL to have taken the call, then for the stream, and
// compares every element with the exact sum.
void collect(Lane& lane, int ranks, int call, std::size_t count, Clock::time_point deadline) {
  // Only once NCCL answers success is the all-reduce on the stream: a copy queued before
  // that would run ahead of it.
  const ncclResult_t state = settled(lane.comm, deadline);
  if (state != ncclSuccess) {
    lane.fail(callName(call, count) + ": " +
                  (state == ncclInProgress ? "still in progress after 60 s" : "NCCL reports " + std::to_string(state)),
              true);
    return;
  }
  if (cudaMemcpyAsync(lane.hostOut, lane.recv, count * sizeof(float), cudaMemcpyDeviceToHost, lane.stream) !=
          cudaSuccess ||
      !idleBy(lane.stream, deadline)) {
    lane.fail(callName(call, count) + ": " + cudaGetErrorString(cudaStreamQuery(lane.stream)) +
                  " (the stream did not finish within 60 s, or failed)",
              true);
    return;
  }
  ++lane.calls;
  for (std::size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < ranks; ++r) expected += inputAt(r, i, call, lane.index);
    if (lane.hostOut[i] != expected) {
      // Right or wrong, the peers make the same calls: the lane goes on.
      lane.fail(callName(call, count) + ": element " + std::to_string(i) + " is " + std::to_string(lane.hostOut[i]) +
                    ", not " + std::to_string(expected),
                false);
      return;
    }
  }
}

// Ends the process if the first all-reduces are not done in time: a rank that waits inside
// its first all-reduce (the deadlock this program exists for) never comes back to look.
class Watchdog {
 public:
  Watchdog(int rank, const std::string& order)
      : thread_([this, rank, order] {
          // Later than the polls' own bound: where they are what waits, they say what.
          const Clock::time_point deadline = Clock::now() + kWait + std::chrono::seconds(5);
          while (!done_.load() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          if (done_.load()) return;
          std::printf("rank %d: FAIL: first all-reduces (%s) not done within 60 s\n", rank, order.c_str());
          std::fflush(stdout);
          _exit(1);  // exit() would run the library's and NCCL's handlers, which may wait too
        }) {}
  ~Watchdog() { stop(); }
  void stop() {
    done_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

bool createNonblocking(Lane& lane, int rank, int ranks, const ncclUniqueId& id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t created = ncclCommInitRankConfig(&lane.comm, ranks, id, rank, &config);
  if (created != ncclSuccess && created != ncclInProgress) return false;
  return settled(lane.comm, Clock::now() + kWait) == ncclSuccess;
}

int oppositeOrder(int rank, int ranks, const std::string& idPath) {
  Lane lanes[2] = {{"A", 0}, {"B", 1}};
  ncclUniqueId ids[2];
  if (!shareUniqueIdThroughFile(rank, idPath, &ids[0]) || !shareUniqueIdThroughFile(rank, idPath + ".b", &ids[1])) {
    std::printf("rank %d: FAIL: no unique ids\n", rank);
    return 1;
  }
  for (int l = 0; l < 2; ++l) {
    if (!lanes[l].prepare()) {
      std::printf("rank %d: FAIL: CUDA set-up\n", rank);
      return 1;
    }
    // Every rank creates A, then B: only the first all-reduces come in opposite orders.
    if (!createNonblocking(lanes[l], rank, ranks, ids[l])) {
      std::printf("rank %d: FAIL: ncclCommInitRankConfig (nonblocking) of %s\n", rank, lanes[l].name);
      return 1;
    }
  }

  Lane* order[2] = {&lanes[rank % 2], &lanes[1 - rank % 2]};
  const std::string orderText = std::string(order[0]->name) + " then " + order[1]->name;
  {
    Watchdog watchdog(rank, orderText);
    const Clock::time_point start = Clock::now();
    bool issued[2] = {false, false};
    for (int o = 0; o < 2; ++o) issued[o] = issue(*order[o], rank, 0, kCounts[0]);
    for (int o = 0; o < 2; ++o) {
      if (issued[o]) collect(*order[o], ranks, 0, kCounts[0], start + kWait);
    }
    watchdog.stop();
    if (order[0]->broken || order[1]->broken) {
      std::printf("rank %d: FAIL: first all-reduces (%s) not done within 60 s, or failed\n", rank, orderText.c_str());
    } else {
      std::printf("rank %d: first all-reduces (%s) done after %.3f s\n", rank, orderText.c_str(), since(start));
    }
  }

  for (int call = 1; call <= kCheckedCalls; ++call) {
    const std::size_t count = kCounts[static_cast<std::size_t>(call) % kSizes];
    for (Lane& lane : lanes) {
      if (!lane.broken && issue(lane, rank, call, count)) {
        collect(lane, ranks, call, count, Clock::now() + kWait);
      }
    }
  }

  bool right = true;
  for (Lane& lane : lanes) {
    if (lane.problem.empty()) {
      std::printf("rank %d comm %s: sums right (%d all-reduces, 1 KiB to 1 MiB)\n", rank, lane.name, lane.calls);
    } else {
      std::printf("rank %d comm %s: sums WRONG: %s\n", rank, lane.name, lane.problem.c_str());
      right = false;
    }
  }
  // A broken communicator may still have work on its stream: only an abort is safe then.
  const bool broken = lanes[0].broken || lanes[1].broken;
  bool ended = true;
  for (Lane& lane : lanes) {
    const ncclResult_t result = broken ? ncclCommAbort(lane.comm) : ncclCommDestroy(lane.comm);
    // A nonblocking communicator may answer "in progress": its handle is gone, nothing to poll.
    if (result != ncclSuccess && result != ncclInProgress) {
      std::printf("rank %d comm %s: %s returned %d\n", rank, lane.name, broken ? "ncclCommAbort" : "ncclCommDestroy",
                  static_cast<int>(result));
      ended = false;
    }
  }
  return right && ended ? 0 : 1;
}

// The program's own first collective on the communicator, as NCCL alone meets the dead peer
// in it (the reference): "rank R: first all-reduce returned N after T s".
void firstAllReduce(int rank, ncclComm_t comm) {
  float* buffer = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&buffer, 1024 * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::printf("rank %d: FAIL: no buffer or stream for the first all-reduce\n", rank);
    return;
  }
  const Clock::time_point start = Clock::now();
  const ncclResult_t reduced = ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, comm, stream);
  std::printf("rank %d: first all-reduce returned %d after %.2f s\n", rank, static_cast<int>(reduced), since(start));
}

int deadPeer(int rank, int ranks, const std::string& idPath, bool withFirstCall) {
  ncclUniqueId id{};
  if (!shareUniqueIdThroughFile(rank, idPath, &id)) {
    std::printf("rank %d: FAIL: no unique id\n", rank);
    return 1;
  }
  ncclComm_t comm = nullptr;
  if (rank == ranks - 1) {
    const ncclResult_t created = pncclCommInitRank(&comm, ranks, id, rank);
    std::printf("rank %d: NCCL's own init (pncclCommInitRank) returned %d; leaving without destroying it\n", rank,
                static_cast<int>(created));
    std::fflush(stdout);
    _exit(created == ncclSuccess ? 0 : 1);  // no destroy, no exit handlers: as a crash would
  }
  const Clock::time_point start = Clock::now();
  const ncclResult_t created = ncclCommInitRank(&comm, ranks, id, rank);
  std::printf("rank %d: init returned %d after %.2f s\n", rank, static_cast<int>(created), since(start));
  if (comm != nullptr && withFirstCall) firstAllReduce(rank, comm);
  if (comm != nullptr) {
    const Clock::time_point aborting = Clock::now();
    const ncclResult_t aborted = ncclCommAbort(comm);
    std::printf("rank %d: abort returned %d after %.2f s\n", rank, static_cast<int>(aborted), since(aborting));
  }
  return created == ncclSuccess ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // the log interleaves with the library's stderr
  if (argc < 5) {
    std::fprintf(stderr, "usage: setup_order_e2e opposite-order|dead-peer RANK NRANKS ID_FILE [first-call]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int rank = std::atoi(argv[2]);
  const int ranks = std::atoi(argv[3]);
  if (cudaSetDevice(0) != cudaSuccess) {
    std::printf("rank %d: FAIL: cudaSetDevice\n", rank);
    return 1;
  }
  if (mode == "opposite-order") return oppositeOrder(rank, ranks, argv[4]);
  if (mode == "dead-peer") return deadPeer(rank, ranks, argv[4], argc > 5 && std::string(argv[5]) == "first-call");
  std::fprintf(stderr, "setup_order_e2e: unknown mode %s\n", mode.c_str());
  return 2;
}
