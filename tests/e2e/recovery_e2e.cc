// NCCL's recovery paths with the library loaded, through the real NCCL: two ranks, one
// process each (tests/e2e/run_e2e.py runs them on one GPU under MPS). In most
// scenarios rank 1 joins the communicator but never the all-reduce that rank 0's kernel of
// ours then waits in; rank 0 ends the wait through one recovery path and must get control
// back in bounded time. Prints "rank R: SCENARIO: PASS|FAIL ..." and exits 0 (PASS), 1
// (FAIL) or 77 (cannot run here).
//
//   recovery_e2e SCENARIO RANK ID_FILE [DEVICE]
//   SCENARIO: shrink-abort | revoke | finalize-abort | destroy-abort | destroy-alone |
//             setup-abort | ineligible-abort | async-error
//   ineligible-abort expects NCCL_CAR_TEST_FAULT=launch-error on rank 0.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "unique_id_file.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kCount = 1 << 16;  // 256 KiB of fp32: taken by our kernels

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
void sleepSeconds(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

struct Rank {
  std::string scenario;
  int rank = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* buffer = nullptr;
};

int verdict(const Rank& self, bool pass, const std::string& detail) {
  std::printf("rank %d: %s: %s %s\n", self.rank, self.scenario.c_str(), pass ? "PASS" : "FAIL", detail.c_str());
  std::fflush(stdout);
  return pass ? 0 : 1;
}

// Seconds until the stream is idle, or -1 after `limit`.
double idleWithin(cudaStream_t stream, double limit) {
  const Clock::time_point start = Clock::now();
  while (cudaStreamQuery(stream) == cudaErrorNotReady) {
    if (since(start) > limit) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return since(start);
}

bool waitInitialised(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 60000 && state == ncclInProgress; ++i) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state == ncclSuccess;
}

// An all-reduce rank 1 never joins: our kernel waits in its first barrier.
ncclResult_t spin(Rank& self) {
  return ncclAllReduce(self.buffer, self.buffer, kCount, ncclFloat32, ncclSum, self.comm, self.stream);
}

// Whether the all-reduce is still waiting when the recovery call comes: what the call then
// ends is that wait (the runner reads in the library's log that the kernel was ours).
bool stillRunning(Rank& self) { return cudaStreamQuery(self.stream) == cudaErrorNotReady; }

std::string waitingText(bool waiting) { return waiting ? "still running" : "already finished"; }

std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f s", value);
  return text;
}

int shrinkAbort(Rank& self) {
  if (spin(self) != ncclSuccess) return verdict(self, false, "all-reduce failed");
  sleepSeconds(1);
  const bool waiting = stillRunning(self);
  int excluded[1] = {1};
  ncclComm_t child = nullptr;
  const ncclResult_t shrunk = ncclCommShrink(self.comm, excluded, 1, &child, nullptr, NCCL_SHRINK_ABORT);
  const double idle = idleWithin(self.stream, 10);
  if (child != nullptr) ncclCommDestroy(child);
  ncclCommAbort(self.comm);
  return verdict(self, waiting && shrunk == ncclSuccess && idle >= 0 && idle < 5,
                 "all-reduce " + waitingText(waiting) + " at the shrink; shrink -> " + std::to_string(shrunk) +
                     ", stream idle " + (idle < 0 ? "never" : seconds(idle) + " after it"));
}

int revoke(Rank& self) {
  if (spin(self) != ncclSuccess) return verdict(self, false, "all-reduce failed");
  sleepSeconds(1);
  const bool waiting = stillRunning(self);
  const ncclResult_t revoked = ncclCommRevoke(self.comm, NCCL_REVOKE_DEFAULT);
  const double idle = idleWithin(self.stream, 10);
  waitInitialised(self.comm);  // NCCL: in progress until quiescent
  // A call of ours on the revoked communicator: forwarded, so NCCL answers it.
  const ncclResult_t after = ncclAllReduce(self.buffer, self.buffer, kCount, ncclFloat32, ncclSum, self.comm, self.stream);
  const double idleAfter = idleWithin(self.stream, 10);
  ncclCommDestroy(self.comm);
  return verdict(self, waiting && revoked == ncclSuccess && idle >= 0 && idle < 5 && idleAfter >= 0,
                 "all-reduce " + waitingText(waiting) + " at the revoke; revoke -> " + std::to_string(revoked) +
                     ", stream idle " + (idle < 0 ? "never" : seconds(idle)) + " after it; a later all-reduce -> " +
                     std::to_string(after));
}

// A thread that aborts the communicator 2 s after it starts, as PyTorch's watchdog would.
class Watchdog {
 public:
  explicit Watchdog(ncclComm_t comm) : start_(Clock::now()), thread_([this, comm] {
    sleepSeconds(2);
    ncclCommAbort(comm);
    abortReturned_ = since(start_);
  }) {}
  // Joins; seconds from the start until the abort returned.
  double join() {
    thread_.join();
    return abortReturned_;
  }
  double elapsed() const { return since(start_); }

 private:
  Clock::time_point start_;
  std::atomic<double> abortReturned_{-1};
  std::thread thread_;
};

// ncclCommFinalize or ncclCommDestroy while a watchdog thread aborts 2 s later.
int releaseWithWatchdog(Rank& self, bool finalize) {
  if (spin(self) != ncclSuccess) return verdict(self, false, "all-reduce failed");
  Watchdog watchdog(self.comm);
  const ncclResult_t released = finalize ? ncclCommFinalize(self.comm) : ncclCommDestroy(self.comm);
  const double returned = watchdog.elapsed();
  const double abortReturned = watchdog.join();
  const double idle = idleWithin(self.stream, 5);
  return verdict(self, returned < 15 && abortReturned < 15 && idle >= 0,
                 std::string(finalize ? "finalize" : "destroy") + " -> " + std::to_string(released) + " at " +
                     seconds(returned) + ", abort returned at " + seconds(abortReturned) + " (called at 2 s)");
}

// No watchdog: our part of destroy gives up on the kernel after 30 s and stops it.
int destroyAlone(Rank& self) {
  if (spin(self) != ncclSuccess) return verdict(self, false, "all-reduce failed");
  const Clock::time_point start = Clock::now();
  std::atomic<double> idleAt{-1};
  std::thread monitor([&] {
    const double idle = idleWithin(self.stream, 60);
    idleAt = idle < 0 ? -1 : since(start);
  });
  const ncclResult_t destroyed = ncclCommDestroy(self.comm);
  const double returned = since(start);
  monitor.join();
  return verdict(self, idleAt >= 0 && idleAt < 45 && returned < 55,
                 "destroy -> " + std::to_string(destroyed) + " at " + seconds(returned) + ", stream idle at " +
                     (idleAt < 0 ? "never" : seconds(idleAt)));
}

// A nonblocking communicator: its first all-reduce starts our set-up, whose exchange waits
// for rank 1's part (it never comes), and returns at once (ncclInProgress: NCCL runs it with
// our exchange, later); a watchdog aborts 2 s later, while the set-up still waits in the
// background.
int setupAbort(Rank& self) {
  Watchdog watchdog(self.comm);
  const ncclResult_t reduced = spin(self);
  const double returned = watchdog.elapsed();
  const double abortReturned = watchdog.join();
  // The all-reduce waits for nothing; the abort is bounded by NCCL's own and our wait for a
  // set-up call of ours in flight (at most 5 s).
  return verdict(self, returned < 1 && abortReturned < 15 && reduced != ncclSuccess,
                 "all-reduce -> " + std::to_string(reduced) + " at " + seconds(returned) + ", abort returned at " +
                     seconds(abortReturned) + " (called at 2 s)");
}

int ineligibleAbort(Rank& self) {
  if (spin(self) != ncclSuccess) return verdict(self, false, "all-reduce failed");
  sleepSeconds(1);
  const bool waiting = stillRunning(self);
  const Clock::time_point aborted = Clock::now();
  ncclCommAbort(self.comm);
  const double returned = since(aborted);
  const double idle = idleWithin(self.stream, 10);
  return verdict(self, waiting && idle >= 0 && idle < 5,
                 "all-reduce " + waitingText(waiting) + " at the abort; abort returned after " + seconds(returned) +
                     ", stream idle " + (idle < 0 ? "never" : seconds(idle) + " after it"));
}

// Both ranks: all-reduces until ours take them (the nonblocking communicator is set up in the
// background from its first call, and its calls go to NCCL until the ranks agree), each waited
// for as NCCL asks; then a group NCCL fails (a send to no such peer), which leaves the
// communicator with an asynchronous error; the next all-reduce must reach NCCL and return its
// error.
int asyncError(Rank& self) {
  constexpr int kCallsWhileSettingUp = 300;  // 1 ms apart: the set-up settles well inside it
  for (int i = 0; i < kCallsWhileSettingUp; ++i) {
    const ncclResult_t called = spin(self);
    if ((called != ncclSuccess && called != ncclInProgress) || !waitInitialised(self.comm) ||
        cudaStreamSynchronize(self.stream) != cudaSuccess) {
      return verdict(self, false, "an all-reduce before the error failed (" + std::to_string(called) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ncclGroupStart();
  ncclBroadcast(self.buffer, self.buffer, 1, ncclFloat32, 0, self.comm, self.stream);  // NCCL's: joins the group
  ncclSend(self.buffer, 1, ncclFloat32, 99, self.comm, self.stream);
  const ncclResult_t group = ncclGroupEnd();
  ncclResult_t async = ncclInProgress;
  for (int i = 0; i < 10000 && async == ncclInProgress; ++i) {
    ncclCommGetAsyncError(self.comm, &async);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (async == ncclSuccess) {
    std::printf("rank %d: %s: SKIPPED (NCCL kept no asynchronous error after a failed group: %d)\n", self.rank,
                self.scenario.c_str(), static_cast<int>(group));
    ncclCommAbort(self.comm);
    return 77;
  }
  // What the per-call check costs: NCCL's ncclCommGetAsyncError, timed here.
  constexpr int kQueries = 200000;
  const Clock::time_point timed = Clock::now();
  for (int i = 0; i < kQueries; ++i) ncclCommGetAsyncError(self.comm, &async);
  const double nanoseconds = since(timed) * 1e9 / kQueries;
  const ncclResult_t after = spin(self);
  const double idle = idleWithin(self.stream, 10);
  ncclCommAbort(self.comm);
  char cost[64];
  std::snprintf(cost, sizeof(cost), "%.0f ns per ncclCommGetAsyncError", nanoseconds);
  return verdict(self, after != ncclSuccess && idle >= 0,
                 "async error " + std::to_string(async) + ", the next all-reduce -> " + std::to_string(after) + "; " +
                     cost);
}

bool nonblockingScenario(const std::string& scenario) { return scenario == "setup-abort" || scenario == "async-error"; }

double rank1HoldSeconds(const std::string& scenario) { return scenario == "destroy-alone" ? 60 : 15; }

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 4) {
    std::fprintf(stderr, "usage: recovery_e2e SCENARIO RANK ID_FILE [DEVICE]\n");
    return 2;
  }
  Rank self;
  self.scenario = argv[1];
  self.rank = std::atoi(argv[2]);
  if (cudaSetDevice(argc > 4 ? std::atoi(argv[4]) : 0) != cudaSuccess) return verdict(self, false, "cudaSetDevice");
  ncclUniqueId id{};
  if (!shareUniqueIdThroughFile(self.rank, argv[3], &id)) return verdict(self, false, "sharing the unique id");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = nonblockingScenario(self.scenario) ? 0 : 1;
  const ncclResult_t init = ncclCommInitRankConfig(&self.comm, 2, id, self.rank, &config);
  if ((init != ncclSuccess && init != ncclInProgress) || !waitInitialised(self.comm)) {
    return verdict(self, false, "ncclCommInitRankConfig");
  }
  if (cudaMalloc(&self.buffer, kCount * sizeof(float)) != cudaSuccess ||
      cudaMemset(self.buffer, 0, kCount * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&self.stream, cudaStreamNonBlocking) != cudaSuccess) {
    return verdict(self, false, "CUDA set-up");
  }

  int version = 0;
  ncclGetVersion(&version);
  const int needed = self.scenario == "revoke" ? 22800 : self.scenario == "shrink-abort" ? 22700 : 0;
  if (version < needed) {
    std::printf("rank %d: %s: SKIPPED (NCCL %d lacks the call; %d needed)\n", self.rank, self.scenario.c_str(),
                version, needed);
    ncclCommAbort(self.comm);
    return 77;
  }

  if (self.rank == 1 && self.scenario != "async-error") {
    // Joins, never all-reduces, stays alive while rank 0 recovers, then leaves.
    sleepSeconds(rank1HoldSeconds(self.scenario));
    ncclCommAbort(self.comm);
    return verdict(self, true, "left without joining");
  }
  if (self.scenario == "shrink-abort") return shrinkAbort(self);
  if (self.scenario == "revoke") return revoke(self);
  if (self.scenario == "finalize-abort") return releaseWithWatchdog(self, true);
  if (self.scenario == "destroy-abort") return releaseWithWatchdog(self, false);
  if (self.scenario == "destroy-alone") return destroyAlone(self);
  if (self.scenario == "setup-abort") return setupAbort(self);
  if (self.scenario == "ineligible-abort") return ineligibleAbort(self);
  if (self.scenario == "async-error") return asyncError(self);
  return verdict(self, false, "unknown scenario");
}
