// The stand-in NCCL's recording and its communicator life-cycle. See standin_nccl.h.
#include "standin_nccl.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

namespace standin {
namespace {

int logFile() {
  static const int fd = [] {
    const char* path = std::getenv("STANDIN_NCCL_LOG");
    return path == nullptr ? -1 : open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  }();
  return fd;
}

void writeLine(const std::string& text) {
  const int fd = logFile();
  if (fd < 0) return;
  const std::string line = text + "\n";
  // One write() per line: O_APPEND keeps concurrent lines whole.
  [[maybe_unused]] const ssize_t written = write(fd, line.data(), line.size());
}

bool forcedResult(const char* function, int* result) {
  const std::string name = std::string("STANDIN_NCCL_RESULT_") + function;
  const char* text = std::getenv(name.c_str());
  if (text == nullptr || text[0] == '\0') return false;
  *result = std::atoi(text);
  return true;
}

std::mutex gCommsMutex;
std::vector<ncclComm*>* gComms = new std::vector<ncclComm*>();  // reachable: not a leak

std::atomic<int> gViolations{0};

// The calling thread's name starts with "car-": one of the library's own threads.
bool onLibraryThread(std::string* name) {
  char text[32] = {};
  if (pthread_getname_np(pthread_self(), text, sizeof(text)) != 0) return false;
  *name = text;
  return std::strncmp(text, "car-", 4) == 0;
}

int asyncPolls() {
  const char* polls = std::getenv("STANDIN_NCCL_ASYNC_POLLS");
  return polls != nullptr ? std::atoi(polls) : 2;
}

}  // namespace

void violation(const char* kind, const std::string& text) {
  ++gViolations;
  const std::string line = std::string("standin: VIOLATION ") + kind + ": " + text + "\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, line.data(), line.size());
}

bool asyncJobs() {
  static const bool enabled = [] {
    const char* text = std::getenv("STANDIN_NCCL_ASYNC_JOBS");
    return text != nullptr && std::strcmp(text, "1") == 0;
  }();
  return enabled;
}

void linkGroupJob(ncclComm_t comm) {
  if (comm == nullptr || !comm->nonblocking) return;
  comm->pendingPolls = asyncPolls();
  comm->groupJob = true;
}

bool stillInProgress(ncclComm_t comm) {
  return asyncJobs() && comm != nullptr && comm->nonblocking && comm->pendingPolls.load() > 0;
}

ncclResult_t finish(CallLine& line, const char* function, ncclResult_t normal) {
  int result = static_cast<int>(normal);
  forcedResult(function, &result);
  line.num("result", result);
  record(line);
  return static_cast<ncclResult_t>(result);
}

void record(CallLine& line) {
  line.num("tid", static_cast<long long>(syscall(SYS_gettid)));
  std::string thread;
  if (onLibraryThread(&thread)) violation("car-thread", line.str() + " from thread " + thread);
  writeLine(line.str());
}

// STANDIN_NCCL_REUSE_ADDRESSES=1: a destroyed communicator, to be handed out again.
ncclComm* reusable() {
  const char* reuse = std::getenv("STANDIN_NCCL_REUSE_ADDRESSES");
  if (reuse == nullptr || std::strcmp(reuse, "1") != 0) return nullptr;
  std::lock_guard<std::mutex> lock(gCommsMutex);
  for (ncclComm* comm : *gComms) {
    if (comm->destroyed.load()) return comm;
  }
  return nullptr;
}

ncclComm* newComm(int rank, int nranks, int device, bool nonblocking) {
  ncclComm* comm = reusable();
  if (comm != nullptr) {
    comm->destroyed = false;
  } else {
    comm = new ncclComm();
    std::lock_guard<std::mutex> lock(gCommsMutex);
    gComms->push_back(comm);
  }
  comm->rank = rank;
  comm->nranks = nranks;
  comm->device = device;
  comm->nonblocking = nonblocking;
  if (nonblocking) {
    comm->pendingPolls = asyncPolls();
    comm->groupJob = asyncJobs();  // its creation is a job NCCL's own thread runs
  }
  return comm;
}

ncclResult_t checkComm(ncclComm_t comm, CallLine& line) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->destroyed.load()) {
    line.num("dead", 1);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

void delayIfAsked(const char* function) {
  const std::string name = std::string("STANDIN_NCCL_DELAY_MS_") + function;
  const char* text = std::getenv(name.c_str());
  if (text != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(text)));
}

int fakeDevice() {
  const char* text = std::getenv("STANDIN_NCCL_DEVICE");
  return text != nullptr ? std::atoi(text) : 0;
}

bool nonblockingFrom(const ncclConfig_t* config, bool inherited) {
  if (config != nullptr && config->blocking != NCCL_CONFIG_UNDEF_INT) return config->blocking == 0;
  return inherited;
}

}  // namespace standin

namespace {

using standin::CallLine;

bool envNonblocking() {
  const char* text = std::getenv("NCCL_COMM_BLOCKING");
  return text != nullptr && std::strcmp(text, "0") == 0;
}

// Creates the communicator of an init call into *out; returns the normal result.
ncclResult_t initOne(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, bool nonblocking, CallLine& line) {
  if (out == nullptr || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  // STANDIN_NCCL_DEVICE_PER_RANK=1: rank r drives device r (ranks as threads, one GPU each).
  const char* perRank = std::getenv("STANDIN_NCCL_DEVICE_PER_RANK");
  const bool ownDevice = perRank != nullptr && std::strcmp(perRank, "1") == 0;
  *out = standin::newComm(rank, nranks, ownDevice ? rank : standin::fakeDevice(), nonblocking);
  standin::joinClique(*out, id);
  line.ptr("made", *out);
  return nonblocking ? ncclInProgress : ncclSuccess;
}

ncclResult_t release(const char* function, ncclComm_t comm) {
  CallLine line = standin::calls::onComm(function, comm);
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess && std::strcmp(function, "ncclCommFinalize") != 0) {
    comm->destroyed = true;
    comm->groupJob = false;  // joined (destroy) or told to stop (abort), then freed
    standin::cliqueMemberEnded(comm);
  }
  return standin::finish(line, function, normal);
}

}  // namespace

extern "C" {

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  CallLine line = standin::calls::initRank(comm, nranks, commId, rank);
  const ncclResult_t normal = initOne(comm, nranks, commId, rank, envNonblocking(), line);
  return standin::finish(line, "ncclCommInitRank", normal);
}

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 14, 0)
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  CallLine line = standin::calls::initRankConfig(comm, nranks, commId, rank, config);
  const bool nonblocking = standin::nonblockingFrom(config, envNonblocking());
  const ncclResult_t normal = initOne(comm, nranks, commId, rank, nonblocking, line);
  return standin::finish(line, "ncclCommInitRankConfig", normal);
}
#endif

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 23, 0)
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  CallLine line = standin::calls::initRankScalable(newcomm, nranks, myrank, nId, commIds, config);
  ncclResult_t normal = ncclInvalidArgument;
  if (nId >= 1 && commIds != nullptr) {
    normal = initOne(newcomm, nranks, commIds[0], myrank, standin::nonblockingFrom(config, envNonblocking()), line);
  }
  return standin::finish(line, "ncclCommInitRankScalable", normal);
}
#endif

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  CallLine line = standin::calls::initAll(comms, ndev, devlist);
  ncclResult_t normal = ncclInvalidArgument;
  if (comms != nullptr && ndev >= 1) {
    std::string made;
    for (int i = 0; i < ndev; ++i) {
      comms[i] = standin::newComm(i, ndev, devlist != nullptr ? devlist[i] : standin::fakeDevice() + i, false);
      made += (i == 0 ? "" : ",") + standin::hex(comms[i]);
    }
    line.text("made", made.c_str());
    normal = ncclSuccess;
  }
  return standin::finish(line, "ncclCommInitAll", normal);
}

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 18, 0)
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  CallLine line = standin::calls::split(comm, color, key, newcomm, config);
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess && newcomm == nullptr) normal = ncclInvalidArgument;
  if (normal == ncclSuccess) {
    const bool nonblocking = standin::nonblockingFrom(config, comm->nonblocking);
    ncclComm_t made = color == NCCL_SPLIT_NOCOLOR ? nullptr : standin::newComm(0, 1, comm->device, nonblocking);
    *newcomm = standin::fillAtGroupEnd(newcomm, made) ? nullptr : made;
    line.ptr("made", *newcomm);  // what the caller holds now; a deferred one is logged at the group's end
    if (made != nullptr && nonblocking) normal = ncclInProgress;
  }
  return standin::finish(line, "ncclCommSplit", normal);
}
#endif

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 27, 0)
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  CallLine line = standin::calls::shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess && (newcomm == nullptr || excludeRanksCount < 0)) normal = ncclInvalidArgument;
  if (normal == ncclSuccess) {
    const bool nonblocking = standin::nonblockingFrom(config, comm->nonblocking);
    const int left = comm->nranks - excludeRanksCount;
    *newcomm = standin::newComm(0, left < 1 ? 1 : left, comm->device, nonblocking);
    line.ptr("made", *newcomm);
    if (nonblocking) normal = ncclInProgress;
  }
  return standin::finish(line, "ncclCommShrink", normal);
}
#endif

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 29, 0)
// New ranks join (comm NULL, uniqueId and rank theirs) or existing ones make way (comm theirs,
// rank -1): each gets a new communicator, of one rank here like a split's.
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config) {
  CallLine line = standin::calls::grow(comm, nRanks, uniqueId, rank, newcomm, config);
  ncclResult_t normal = comm != nullptr ? standin::checkComm(comm, line) : ncclSuccess;
  const bool joining = comm == nullptr;
  if (normal == ncclSuccess && (newcomm == nullptr || nRanks < 1 || (joining && (uniqueId == nullptr || rank < 0)))) {
    normal = ncclInvalidArgument;
  }
  if (normal == ncclSuccess) {
    const bool nonblocking = standin::nonblockingFrom(config, joining ? false : comm->nonblocking);
    ncclComm_t made = standin::newComm(0, 1, joining ? standin::fakeDevice() : comm->device, nonblocking);
    *newcomm = standin::fillAtGroupEnd(newcomm, made) ? nullptr : made;
    line.ptr("made", *newcomm);
    if (nonblocking) normal = ncclInProgress;
  }
  return standin::finish(line, "ncclCommGrow", normal);
}
#endif

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 29, 7)
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  CallLine line = standin::calls::suspend(comm, flags);
  return standin::finish(line, "ncclCommSuspend", standin::checkComm(comm, line));
}
#endif

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 32, 0)
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config) {
  CallLine line = standin::calls::allReduceConfig(sendbuff, recvbuff, count, datatype, op, comm, stream, config);
  return standin::finish(line, "ncclAllReduceConfig", standin::checkComm(comm, line));
}
#endif

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 14, 0)
ncclResult_t ncclCommFinalize(ncclComm_t comm) { return release("ncclCommFinalize", comm); }
#endif
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return release("ncclCommDestroy", comm); }

// The rules callers broke so far (standin_nccl.h).
int standinViolations() { return standin::gViolations.load(); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return release("ncclCommAbort", comm); }

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 28, 7)
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  CallLine line = standin::calls::revoke(comm, revokeFlags);
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess && revokeFlags != NCCL_REVOKE_DEFAULT) normal = ncclInvalidArgument;
  return standin::finish(line, "ncclCommRevoke", normal);
}
#endif

}  // extern "C"
