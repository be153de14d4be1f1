// NCCL 2.29+'s ways for a communicator to change, with the library loaded, through the real
// NCCL (tests/e2e/run_e2e.py runs them on one GPU under MPS, over NCCL 2.32.3 from
// tests/e2e/nccl-version-check.sh). The newer functions are looked up at run time, as a
// program built against a newer nccl.h finds them: an NCCL that lacks them exits 77 (cannot
// run here). Prints "rank R: SCENARIO: PASS|FAIL ..." and exits 0 (PASS) or 1 (FAIL).
//
//   newer_api_e2e suspend RANK ID_FILE      (2 ranks) an all-reduce, ncclCommSuspend(NCCL_SUSPEND_MEM),
//                                           ncclCommResume, an all-reduce: both right
//   newer_api_e2e grow RANK ID_FILE         (3 processes) ranks 0 and 1 make a communicator and an
//                                           all-reduce on it; rank 0 hands out a grow id (ID_FILE.grow);
//                                           all three grow it to 3 ranks (blocking) and all-reduce there
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "checked_all_reduce.h"
#include "unique_id_file.h"

// Built against an older nccl.h too (NCCL_HOME=/usr/local/cuda): the flag as 2.29.7 defines it.
#ifndef NCCL_SUSPEND_MEM
#define NCCL_SUSPEND_MEM 0x01
#endif

namespace {

constexpr int kCannotRunHere = 77;

using GetUniqueIdFn = ncclResult_t (*)(ncclComm_t, ncclUniqueId*);
using GrowFn = ncclResult_t (*)(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*, ncclConfig_t*);
using SuspendFn = ncclResult_t (*)(ncclComm_t, int);
using ResumeFn = ncclResult_t (*)(ncclComm_t);

template <typename Function>
Function newer(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, name));
}

struct Rank {
  std::string scenario;
  int rank = 0;
  CheckedAllReduce allReduce;
};

int verdict(const Rank& self, bool pass, const std::string& detail) {
  std::printf("rank %d: %s: %s %s\n", self.rank, self.scenario.c_str(), pass ? "PASS" : "FAIL", detail.c_str());
  std::fflush(stdout);
  return pass ? 0 : 1;
}

int cannotRunHere(const Rank& self, const std::string& why) {
  std::printf("rank %d: %s: cannot run here: %s\n", self.rank, self.scenario.c_str(), why.c_str());
  std::fflush(stdout);
  return kCannotRunHere;
}

bool rightAllReduce(const Rank& self, ncclComm_t comm, int rank, int ranks, int call, std::string* problem) {
  return self.allReduce.run(comm, rank, ranks, call, problem);
}

int suspend(Rank& self, ncclComm_t comm) {
  const auto suspendComm = newer<SuspendFn>("ncclCommSuspend");
  const auto resumeComm = newer<ResumeFn>("ncclCommResume");
  if (suspendComm == nullptr || resumeComm == nullptr) return cannotRunHere(self, "no ncclCommSuspend/Resume");
  std::string problem;
  if (!rightAllReduce(self, comm, self.rank, 2, 0, &problem)) return verdict(self, false, problem);
  const ncclResult_t suspended = suspendComm(comm, NCCL_SUSPEND_MEM);
  if (suspended == ncclInvalidUsage) return cannotRunHere(self, "ncclCommSuspend answers ncclInvalidUsage");
  if (suspended != ncclSuccess) return verdict(self, false, "ncclCommSuspend returned " + std::to_string(suspended));
  const ncclResult_t resumed = resumeComm(comm);
  if (resumed != ncclSuccess) return verdict(self, false, "ncclCommResume returned " + std::to_string(resumed));
  if (!rightAllReduce(self, comm, self.rank, 2, 1, &problem)) return verdict(self, false, "after resume: " + problem);
  return verdict(self, true, "all-reduces right before the suspend and after the resume");
}

bool writeGrowId(const std::string& path, const ncclUniqueId& id) {
  const std::string temporary = path + ".tmp";
  std::ofstream(temporary, std::ios::binary).write(reinterpret_cast<const char*>(&id), sizeof(id));
  return std::rename(temporary.c_str(), path.c_str()) == 0;
}

bool readGrowId(const std::string& path, ncclUniqueId* id) {
  for (int tries = 0; tries < 12000; ++tries) {
    std::ifstream file(path, std::ios::binary);
    if (file.read(reinterpret_cast<char*>(id), sizeof(*id))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Ranks 0 and 1: `comm` is theirs (2 ranks); rank 2 joins with none.
int grow(Rank& self, ncclComm_t comm, const std::string& growIdPath) {
  const auto getGrowId = newer<GetUniqueIdFn>("ncclCommGetUniqueId");
  const auto growComm = newer<GrowFn>("ncclCommGrow");
  if (getGrowId == nullptr || growComm == nullptr) return cannotRunHere(self, "no ncclCommGrow");
  std::string problem;
  ncclUniqueId growId{};
  if (comm != nullptr) {
    if (!rightAllReduce(self, comm, self.rank, 2, 0, &problem)) return verdict(self, false, problem);
    if (self.rank == 0) {
      const ncclResult_t got = getGrowId(comm, &growId);
      if (got == ncclInvalidUsage) return cannotRunHere(self, "ncclCommGetUniqueId answers ncclInvalidUsage");
      if (got != ncclSuccess || !writeGrowId(growIdPath, growId)) return verdict(self, false, "no grow id");
    }
  } else if (!readGrowId(growIdPath, &growId)) {
    return verdict(self, false, "no grow id from rank 0");
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;  // blocking grown communicators are ours (shim/exports/hooks.cc)
  ncclComm_t grown = nullptr;
  const bool root = self.rank == 0;
  const ncclResult_t result = growComm(comm, 3, comm == nullptr || root ? &growId : nullptr,
                                       comm == nullptr ? self.rank : -1, &grown, &config);
  if (result != ncclSuccess || grown == nullptr) return verdict(self, false, "ncclCommGrow returned " + std::to_string(result));
  int rank = -1;
  int ranks = 0;
  if (ncclCommUserRank(grown, &rank) != ncclSuccess || ncclCommCount(grown, &ranks) != ncclSuccess || ranks != 3) {
    return verdict(self, false, "the grown communicator's rank or size");
  }
  for (int call = 1; call <= 2; ++call) {
    if (!rightAllReduce(self, grown, rank, 3, call, &problem)) return verdict(self, false, "grown: " + problem);
  }
  if (ncclCommDestroy(grown) != ncclSuccess) return verdict(self, false, "ncclCommDestroy of the grown one");
  return verdict(self, true, "rank " + std::to_string(rank) + " of the grown 3; its all-reduces right");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: newer_api_e2e suspend|grow RANK ID_FILE\n");
    return 2;
  }
  Rank self;
  self.scenario = argv[1];
  self.rank = std::atoi(argv[2]);
  const std::string idPath = argv[3];
  if (cudaSetDevice(0) != cudaSuccess || !self.allReduce.prepare()) {
    return verdict(self, false, "CUDA set-up failed");
  }
  const bool joining = self.scenario == "grow" && self.rank == 2;
  ncclComm_t comm = nullptr;
  if (!joining) {
    ncclUniqueId id;
    if (!shareUniqueIdThroughFile(self.rank, idPath, &id)) return verdict(self, false, "no unique id");
    if (ncclCommInitRank(&comm, 2, id, self.rank) != ncclSuccess) return verdict(self, false, "ncclCommInitRank");
  }
  int status = 2;
  if (self.scenario == "suspend") status = suspend(self, comm);
  else if (self.scenario == "grow") status = grow(self, comm, idPath + ".grow");
  else status = verdict(self, false, "unknown scenario");
  if (comm != nullptr && ncclCommDestroy(comm) != ncclSuccess && status == 0) status = verdict(self, false, "ncclCommDestroy");
  return status;
}
