// The stand-in's data exchange (STANDIN_NCCL_EXCHANGE=1): the communicators made from one
// unique id in one process are the ranks of one clique, and their all-gathers really gather,
// in host memory (the fake CUDA runtime's device memory is host memory: tests/fake_cuda/).
// Each communicator's n-th all-gather meets the n-th of every other rank; a thread waits for
// the others as NCCL's kernels would, so ranks are threads that make the same calls in the
// same order. Inside a group the all-gathers run at the thread's outermost group end, in the
// order they were issued.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "standin_nccl.h"

namespace standin {

struct Clique {
  struct Round {
    std::vector<const void*> sends;
    int arrived = 0;
    int departed = 0;
  };
  std::mutex mutex;
  std::condition_variable changed;
  int nranks = 0;
  std::map<std::uint64_t, Round> rounds;
};

namespace {

// How long a rank waits for the others in one all-gather before it returns ncclSystemError:
// long enough for any test machine, short enough that a rank that never comes fails the run
// instead of hanging it. STANDIN_NCCL_EXCHANGE_TIMEOUT_MS sets another.
std::chrono::milliseconds roundTimeout() {
  static const std::chrono::milliseconds timeout = [] {
    const char* text = std::getenv("STANDIN_NCCL_EXCHANGE_TIMEOUT_MS");
    return std::chrono::milliseconds(text != nullptr ? std::atol(text) : 60000);
  }();
  return timeout;
}

struct QueuedGather {
  ncclComm_t comm;
  const void* send;
  void* recv;
  std::size_t bytes;
};

thread_local std::vector<QueuedGather> tQueued;

std::mutex gCliquesMutex;
std::map<std::string, Clique*>& cliques() {
  static auto* all = new std::map<std::string, Clique*>();  // never freed, like the communicators
  return *all;
}

ncclResult_t gather(ncclComm_t comm, const void* send, void* recv, std::size_t bytes) {
  Clique& clique = *comm->clique;
  std::unique_lock<std::mutex> lock(clique.mutex);
  Clique::Round& round = clique.rounds[comm->gathers++];
  round.sends.resize(static_cast<std::size_t>(clique.nranks), nullptr);
  round.sends[static_cast<std::size_t>(comm->rank)] = send;
  ++round.arrived;
  clique.changed.notify_all();
  if (!clique.changed.wait_for(lock, roundTimeout(), [&] { return round.arrived == clique.nranks; })) {
    round.sends[static_cast<std::size_t>(comm->rank)] = nullptr;
    --round.arrived;
    return ncclSystemError;
  }
  // Every send buffer stays valid until every rank has copied (the departures below).
  for (int r = 0; r < clique.nranks; ++r) {
    std::memcpy(static_cast<char*>(recv) + static_cast<std::size_t>(r) * bytes, round.sends[static_cast<std::size_t>(r)],
                bytes);
  }
  ++round.departed;
  clique.changed.notify_all();
  clique.changed.wait(lock, [&] { return round.departed == clique.nranks; });
  return ncclSuccess;
}

}  // namespace

bool exchangeEnabled() {
  static const bool enabled = [] {
    const char* text = std::getenv("STANDIN_NCCL_EXCHANGE");
    return text != nullptr && std::strcmp(text, "1") == 0;
  }();
  return enabled;
}

void joinClique(ncclComm_t comm, const ncclUniqueId& id) {
  if (!exchangeEnabled()) return;
  const std::string key(id.internal, sizeof(id.internal));
  std::lock_guard<std::mutex> lock(gCliquesMutex);
  Clique*& clique = cliques()[key];
  if (clique == nullptr) {
    clique = new Clique();
    clique->nranks = comm->nranks;
  }
  comm->clique = clique->nranks == comm->nranks ? clique : nullptr;
}

ncclResult_t allGather(ncclComm_t comm, const void* send, void* recv, std::size_t bytes, bool inGroup) {
  if (comm->clique == nullptr) return ncclSuccess;  // recorded only, as without the exchange
  if (inGroup) {
    tQueued.push_back(QueuedGather{comm, send, recv, bytes});
    return ncclSuccess;
  }
  return gather(comm, send, recv, bytes);
}

void dropQueuedGathers() { tQueued.clear(); }

ncclResult_t runQueuedGathers() {
  std::vector<QueuedGather> queued;
  queued.swap(tQueued);
  ncclResult_t result = ncclSuccess;
  for (const QueuedGather& one : queued) {
    const ncclResult_t ran = gather(one.comm, one.send, one.recv, one.bytes);
    if (result == ncclSuccess) result = ran;
  }
  return result;
}

}  // namespace standin
