// A fork()ed child can always log (plugin/log_file.h, MovableSink's fork handlers): a thread
// of the parent that was writing a line when another forked must not leave the log's lock
// held in the child, where no thread would ever release it. Made certain, not left to
// chance: the writer is stuck in a write to a full pipe when the fork is asked for.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "log.h"

using namespace car;

namespace {

using Clock = std::chrono::steady_clock;

// Waits up to `seconds` for `pid`; its exit code, or -1 (then it is killed) when it did not end.
int waitFor(pid_t pid, double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// In a process of its own (the log is redirected for good): 0 when the child logged and
// exited, 1 when it hung, 2 on a set-up failure.
int forkWhileAnotherThreadLogs() {
  int pipeEnds[2];
  if (pipe(pipeEnds) != 0) return 2;
  fcntl(pipeEnds[1], F_SETPIPE_SZ, 4096);
  if (!logToFile("/proc/self/fd/" + std::to_string(pipeEnds[1]), nullptr)) return 2;
  setLogLevel(LogLevel::Info);
  // A line larger than the pipe: its write blocks, with the log's lock held, until read.
  // Device 0 given: the line asks CUDA nothing, which a fork()ed child must not use.
  std::thread writer([] { CAR_INFO(0, "{}", std::string(1 << 16, 'x')); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::atomic<bool> done{false};
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the fork is asked for first
    fcntl(pipeEnds[0], F_SETFL, O_NONBLOCK);
    char buffer[4096];
    while (!done.load()) {
      if (read(pipeEnds[0], buffer, sizeof(buffer)) <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const pid_t child = fork();
  if (child == 0) {
    CAR_INFO(0, "a line from the fork()ed child");
    _exit(0);
  }
  const int code = child < 0 ? 2 : waitFor(child, 10);
  done.store(true);
  writer.join();
  reader.join();
  return code == 0 ? 0 : (code == -1 ? 1 : 2);
}

}  // namespace

TEST_CASE("log: a fork() while another thread writes a line leaves the child a log it can write to", "[log][fork]") {
  const pid_t harness = fork();
  REQUIRE(harness >= 0);
  if (harness == 0) _exit(forkWhileAnotherThreadLogs());
  const int result = waitFor(harness, 30);
  INFO("1: the child's line waited for a lock it inherited held; 2: set-up failed; -1: the whole run hung");
  CHECK(result == 0);
}
