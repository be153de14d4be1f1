#include "lifecycle/setup_worker.h"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "log.h"

namespace car {
namespace {

// Between two rounds in which nothing settled, the pause doubles up to this.
constexpr auto kLongestPause = std::chrono::microseconds(500);
constexpr auto kShortestPause = std::chrono::microseconds(50);

struct Worker {
  std::mutex mutex;
  std::condition_variable changed;  // work arrived, a set-up settled, or the process ends
  std::vector<std::shared_ptr<SetUp>> active;
  std::deque<std::function<void()>> chores;  // never destroyed: left undone at exit
  bool running = false;  // the thread exists (in this process)
  bool busy = false;     // it is in a step (a set-up's advance or a chore): it may be inside CUDA
  bool exiting = false;  // no step starts any more
};

// Never freed: the thread may still look at it while the process ends.
Worker* gWorker = nullptr;
std::once_flag gWorkerOnce;

void lockForFork() { gWorker->mutex.lock(); }
void unlockAfterForkInParent() { gWorker->mutex.unlock(); }
void resetAfterForkInChild() {
  // No thread crossed the fork; the parent's set-ups and chores are the parent's. The old
  // worker's mutex was held at the fork: it is left behind, never used again.
  gWorker = new Worker();
}

void stopAtExit() {
  std::unique_lock<std::mutex> lock(gWorker->mutex);
  gWorker->exiting = true;
  gWorker->changed.notify_all();
  // The step in flight may be inside CUDA, which the process is about to tear down.
  if (!gWorker->changed.wait_for(lock, kExitWait, [] { return !gWorker->busy; })) {
    CAR_WARN(-1, "the set-up worker is still in a CUDA call {} s into the process's exit",
             std::chrono::duration_cast<std::chrono::seconds>(kExitWait).count());
  }
}

Worker& worker() {
  std::call_once(gWorkerOnce, [] {
    gWorker = new Worker();
    pthread_atfork(&lockForFork, &unlockAfterForkInParent, &resetAfterForkInChild);
    // Registered after the CUDA runtime's own tear-down (the first set-up has used CUDA by
    // now), so it runs before it.
    std::atexit(&stopAtExit);
  });
  return *gWorker;
}

// Enters a step: false once the process ends (then nothing more runs). Under the lock.
bool beginStep(Worker& self) {
  if (self.exiting) return false;
  self.busy = true;
  return true;
}

// Leaves a step; false once the process ends.
bool endStep(Worker& self) {
  std::lock_guard<std::mutex> lock(self.mutex);
  self.busy = false;
  self.changed.notify_all();
  return !self.exiting;
}

// One chore, if any; false when there was none or the process ends.
bool runOneChore(Worker& self) {
  std::function<void()> chore;
  {
    std::lock_guard<std::mutex> lock(self.mutex);
    if (self.chores.empty() || !beginStep(self)) return false;
    chore = std::move(self.chores.front());
    self.chores.pop_front();
  }
  try {
    chore();
  } catch (const std::exception& error) {
    CAR_WARN(-1, "set-up worker: a chore failed ({}); what it held stays allocated", error.what());
  } catch (...) {
    CAR_WARN(-1, "set-up worker: a chore failed (an unknown exception); what it held stays allocated");
  }
  return endStep(self);
}

// One set-up advanced: whether it settled; it is dropped then, or when it threw.
bool advanceOne(Worker& self, const std::shared_ptr<SetUp>& setUp) {
  {
    std::lock_guard<std::mutex> lock(self.mutex);
    if (!beginStep(self)) return false;
  }
  bool settled = false;
  try {
    settled = setUp->advance(cudaHandshakeDevice(), setupClock());
  } catch (const std::exception& error) {
    setUp->abandonAfterError(error.what());
    settled = true;
  } catch (...) {
    setUp->abandonAfterError("unknown exception");
    settled = true;
  }
  endStep(self);
  return settled;
}

void run() {
  // For the thread's whole life, never restored: its CUDA calls never break a capture of the
  // program's, and it makes none at its end.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) cudaGetLastError();
  auto pause = kShortestPause;
  Worker& self = *gWorker;
  while (true) {
    std::vector<std::shared_ptr<SetUp>> round;
    {
      std::unique_lock<std::mutex> lock(self.mutex);
      self.changed.wait(lock, [&] { return self.exiting || !self.active.empty() || !self.chores.empty(); });
      if (self.exiting) return;
      round = self.active;
    }
    bool anySettled = false;
    std::vector<const SetUp*> settled;
    for (const std::shared_ptr<SetUp>& setUp : round) {
      if (advanceOne(self, setUp)) settled.push_back(setUp.get());
    }
    // One chore a round, after the set-ups: a chore's cudaFree waits for the whole device,
    // and set-ups in flight should not wait behind it.
    runOneChore(self);
    {
      std::lock_guard<std::mutex> lock(self.mutex);
      if (self.exiting) return;
      anySettled = !settled.empty();
      self.active.erase(std::remove_if(self.active.begin(), self.active.end(),
                                       [&](const std::shared_ptr<SetUp>& setUp) {
                                         return std::find(settled.begin(), settled.end(), setUp.get()) !=
                                                settled.end();
                                       }),
                        self.active.end());
      self.changed.notify_all();
      if (self.active.empty()) continue;  // chores only, or nothing: no pause
    }
    pause = anySettled ? kShortestPause : std::min(pause * 2, kLongestPause);
    std::this_thread::sleep_for(pause);
  }
}

// Starts the thread if this process has none yet. Under the lock.
void ensureRunning(Worker& self) {
  if (self.running || self.exiting) return;
  self.running = true;
  std::thread thread(&run);
  pthread_setname_np(thread.native_handle(), "car-setup");
  thread.detach();
}

}  // namespace

void advanceInBackground(const std::vector<std::shared_ptr<SetUp>>& setUps) {
  if (setUps.empty()) return;
  Worker& self = worker();
  std::lock_guard<std::mutex> lock(self.mutex);
  self.active.insert(self.active.end(), setUps.begin(), setUps.end());
  ensureRunning(self);
  self.changed.notify_all();
}

void runInBackground(std::function<void()> chore) {
  Worker& self = worker();
  std::lock_guard<std::mutex> lock(self.mutex);
  self.chores.push_back(std::move(chore));
  ensureRunning(self);
  self.changed.notify_all();
}

void waitUntilSettled(const std::vector<std::shared_ptr<SetUp>>& setUps, double deadline) {
  if (setUps.empty()) return;
  Worker& self = worker();
  const auto allSettled = [&] {
    return std::all_of(setUps.begin(), setUps.end(), [](const std::shared_ptr<SetUp>& setUp) { return setUp->settled(); });
  };
  std::unique_lock<std::mutex> lock(self.mutex);
  while (!allSettled() && setupClock() < deadline && !self.exiting) {
    self.changed.wait_for(lock, std::chrono::milliseconds(10));
  }
}

}  // namespace car
