#include "lifecycle/setup_worker.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "cuda_check.h"
#include "exports/real_nccl.h"
#include "handshake/relaxed_capture.h"
#include "log.h"

namespace car {
namespace {

// Between two rounds in which nothing settled, the pause doubles up to this.
constexpr auto kLongestPause = std::chrono::microseconds(500);
constexpr auto kShortestPause = std::chrono::microseconds(50);
// At exit, how long the process waits for a round in flight before it goes on ending.
constexpr auto kExitWait = std::chrono::seconds(2);

struct Worker {
  std::mutex mutex;
  std::condition_variable changed;  // work arrived, a set-up settled, or the process ends
  std::vector<std::shared_ptr<SetUp>> active;
  bool running = false;  // the thread exists (in this process)
  bool inRound = false;  // it is advancing set-ups now
  bool exiting = false;
};

// Never freed: a detached thread may still use it while the process ends.
Worker* gWorker = nullptr;
std::once_flag gWorkerOnce;

void lockForFork() { gWorker->mutex.lock(); }
void unlockAfterForkInParent() { gWorker->mutex.unlock(); }
void resetAfterForkInChild() {
  // No thread crossed the fork; the parent's set-ups are the parent's. The old worker's
  // mutex was held at the fork: it is left behind, never used again.
  gWorker = new Worker();
}

void stopAtExit() {
  std::unique_lock<std::mutex> lock(gWorker->mutex);
  gWorker->exiting = true;
  gWorker->changed.notify_all();
  // A round in flight may be inside CUDA, which the process is about to tear down.
  gWorker->changed.wait_for(lock, kExitWait, [] { return !gWorker->inRound; });
}

Worker& worker() {
  std::call_once(gWorkerOnce, [] {
    gWorker = new Worker();
    pthread_atfork(&lockForFork, &unlockAfterForkInParent, &resetAfterForkInChild);
    std::atexit(&stopAtExit);
  });
  return *gWorker;
}

void run() {
  // Named, so that a test can tell our thread from the program's (the stand-in NCCL reports
  // any NCCL call made from a thread whose name starts with "car-").
  pthread_setname_np(pthread_self(), "car-setup");
  // For the thread's whole life: its CUDA calls never break a capture of the program's.
  const RelaxedCaptureScope relaxed;
  const RealNccl* real = realNccl();
  auto pause = kShortestPause;
  while (true) {
    std::vector<std::shared_ptr<SetUp>> round;
    {
      Worker& self = *gWorker;
      std::unique_lock<std::mutex> lock(self.mutex);
      self.changed.wait(lock, [&] { return self.exiting || !self.active.empty(); });
      if (self.exiting) return;
      round = self.active;
      self.inRound = true;
    }
    bool anySettled = false;
    std::vector<const SetUp*> dropped;
    for (const std::shared_ptr<SetUp>& setUp : round) {
      try {
        if (real != nullptr) anySettled = setUp->advance(*real, cudaHandshakeDevice(), setupClock()) || anySettled;
      } catch (const std::exception& error) {
        // Not advanced again: its communicator forwards every call as not set up.
        CAR_WARN(setUp->state()->device(), "{}: set-up worker: internal error ({}); the set-up is abandoned and "
                 "its all-reduces go to NCCL", describe(*setUp->state()), error.what());
        dropped.push_back(setUp.get());
      }
    }
    {
      Worker& self = *gWorker;
      std::lock_guard<std::mutex> lock(self.mutex);
      self.inRound = false;
      self.active.erase(std::remove_if(self.active.begin(), self.active.end(),
                                       [&](const std::shared_ptr<SetUp>& setUp) {
                                         return setUp->settled() ||
                                                std::find(dropped.begin(), dropped.end(), setUp.get()) != dropped.end();
                                       }),
                        self.active.end());
      self.changed.notify_all();
    }
    pause = anySettled ? kShortestPause : std::min(pause * 2, kLongestPause);
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace

void advanceInBackground(const std::vector<std::shared_ptr<SetUp>>& setUps) {
  if (setUps.empty()) return;
  Worker& self = worker();
  std::lock_guard<std::mutex> lock(self.mutex);
  self.active.insert(self.active.end(), setUps.begin(), setUps.end());
  if (!self.running) {
    self.running = true;
    std::thread(&run).detach();
  }
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
