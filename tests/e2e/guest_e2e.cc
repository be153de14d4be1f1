// What NCCL alone would do must still happen with the library loaded, through the real NCCL:
// two ranks, one process each (tests/e2e/run_e2e.py runs them on one GPU under MPS). Prints
// "rank R: SCENARIO: PASS|FAIL ..." and exits 0 (PASS) or 1 (FAIL).
//
//   guest_e2e SCENARIO RANK ID_FILE
//   check-pointers (run under NCCL_CHECK_POINTERS=1): an all-reduce on host buffers gets
//     NCCL's ncclInvalidArgument, and no kernel faults; all-reduces on device buffers before
//     and after it are right.
//   fork: after an all-reduce, the process forks; the child ends the inherited communicator
//     (rank 0: ncclCommDestroy, rank 1: ncclCommAbort) and must not die of a fault; the
//     parent's all-reduces after that are right.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "checked_all_reduce.h"
#include "unique_id_file.h"

namespace {

struct Rank {
  std::string scenario;
  int rank = 0;
  ncclComm_t comm = nullptr;
  CheckedAllReduce allReduce;
};

int verdict(const Rank& self, bool pass, const std::string& detail) {
  std::printf("rank %d: %s: %s %s\n", self.rank, self.scenario.c_str(), pass ? "PASS" : "FAIL", detail.c_str());
  std::fflush(stdout);
  return pass ? 0 : 1;
}

bool rightAllReduce(const Rank& self, int call, std::string* problem) {
  return self.allReduce.run(self.comm, self.rank, 2, call, problem);
}

int checkPointers(Rank& self) {
  std::string problem;
  if (!rightAllReduce(self, 0, &problem)) return verdict(self, false, problem);
  const std::size_t count = CheckedAllReduce::kCount;
  std::vector<float> hostSend(count, 1.0f);
  std::vector<float> hostRecv(count, 0.0f);
  const ncclResult_t result =
      ncclAllReduce(hostSend.data(), hostRecv.data(), count, ncclFloat32, ncclSum, self.comm, self.allReduce.stream());
  const cudaError_t done = cudaStreamSynchronize(self.allReduce.stream());
  if (result != ncclInvalidArgument) {
    return verdict(self, false, "host buffers: ncclAllReduce returned " + std::to_string(result) +
                                    ", not ncclInvalidArgument (" + std::to_string(ncclInvalidArgument) + ")");
  }
  if (done != cudaSuccess) return verdict(self, false, std::string("host buffers: the stream ") + cudaGetErrorString(done));
  if (!rightAllReduce(self, 1, &problem)) return verdict(self, false, problem);
  return verdict(self, true, "host buffers refused with ncclInvalidArgument; device all-reduces right");
}

int forkChild(Rank& self) {
  std::string problem;
  if (!rightAllReduce(self, 0, &problem)) return verdict(self, false, problem);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return verdict(self, false, "fork failed");
  if (child == 0) {
    alarm(30);  // NCCL's own behaviour in a forked child is not ours to judge: a hang is cut short
    const bool destroy = self.rank == 0;
    const ncclResult_t result = destroy ? ncclCommDestroy(self.comm) : ncclCommAbort(self.comm);
    std::printf("rank %d: child: %s returned %d\n", self.rank, destroy ? "ncclCommDestroy" : "ncclCommAbort",
                static_cast<int>(result));
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return verdict(self, false, "waitpid failed");
  std::string ended = WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                                        : "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFSIGNALED(status) && WTERMSIG(status) != SIGALRM) return verdict(self, false, "the child was " + ended);
  for (int call = 1; call <= 3; ++call) {
    if (!rightAllReduce(self, call, &problem)) return verdict(self, false, "after the fork: " + problem);
  }
  return verdict(self, true, "the child " + ended + "; the parent's all-reduces right after it");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: guest_e2e check-pointers|fork RANK ID_FILE\n");
    return 2;
  }
  Rank self;
  self.scenario = argv[1];
  self.rank = std::atoi(argv[2]);
  ncclUniqueId id;
  if (!shareUniqueIdThroughFile(self.rank, argv[3], &id)) return verdict(self, false, "no unique id");
  if (cudaSetDevice(0) != cudaSuccess || !self.allReduce.prepare()) {
    return verdict(self, false, "CUDA set-up failed");
  }
  if (ncclCommInitRank(&self.comm, 2, id, self.rank) != ncclSuccess) return verdict(self, false, "ncclCommInitRank");
  int status = 2;
  if (self.scenario == "check-pointers") status = checkPointers(self);
  else if (self.scenario == "fork") status = forkChild(self);
  else status = verdict(self, false, "unknown scenario");
  const ncclResult_t destroyed = ncclCommDestroy(self.comm);
  if (destroyed != ncclSuccess && status == 0) status = verdict(self, false, "ncclCommDestroy");
  return status;
}
