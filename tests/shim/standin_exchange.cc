// The stand-in's data exchange (STANDIN_NCCL_EXCHANGE=1): the communicators made from one
// unique id in one process are the ranks of one clique, and their all-gathers really gather,
// in host memory (the fake CUDA runtime's device memory is host memory: tests/fake_cuda/).
// Each communicator's n-th all-gather meets the n-th of every other rank. As on a GPU, the
// call returns at once and the all-gather is work on its stream: the stream stays busy
// (standinStreamBusy, which the fake runtime's cudaStreamQuery asks) until every rank has
// issued it; the last one to come copies every rank's data into every rank's receive buffer.
// A rank that never comes leaves the others' streams busy for good. Inside a group the
// all-gathers are issued at the thread's outermost group end, in the order they were made.
// Every collective a clique's communicator hands NCCL is sequenced too: the k-th of each rank
// must be the same call as every other rank's k-th (NCCL pairs them by that order alone), or
// a "sequence" violation is reported (standin_nccl.h).
#include <cuda_runtime_api.h>

#include <algorithm>
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
    std::vector<void*> recvs;
    int arrived = 0;
    bool complete = false;
  };
  struct Sequenced {
    CollectiveShape shape;
    int rank = 0;  // the rank that made it first
  };
  int nranks = 0;
  std::map<std::uint64_t, Round> rounds;  // never erased: a stream may still ask about its round
  std::vector<Sequenced> sequence;        // the k-th collective, as the first rank to make it made it
  std::vector<ncclComm_t> members;        // every rank's communicator
  bool lengthsChecked = false;
};

namespace {

struct QueuedGather {
  ncclComm_t comm;
  const void* send;
  void* recv;
  std::size_t bytes;
  cudaStream_t stream;
};

thread_local std::vector<QueuedGather> tQueued;

// One lock for every clique and stream: the exchange is small and only tests use it.
std::mutex gMutex;
std::map<std::string, Clique*>& cliques() {
  static auto* all = new std::map<std::string, Clique*>();  // never freed, like the communicators
  return *all;
}
// The rounds still running on each stream.
std::map<cudaStream_t, std::vector<const Clique::Round*>>& pending() {
  static auto* streams = new std::map<cudaStream_t, std::vector<const Clique::Round*>>();
  return *streams;
}

ncclResult_t gather(const QueuedGather& one) {
  std::lock_guard<std::mutex> lock(gMutex);
  Clique& clique = *one.comm->clique;
  Clique::Round& round = clique.rounds[one.comm->gathers++];
  const auto ranks = static_cast<std::size_t>(clique.nranks);
  round.sends.resize(ranks, nullptr);
  round.recvs.resize(ranks, nullptr);
  round.sends[static_cast<std::size_t>(one.comm->rank)] = one.send;
  round.recvs[static_cast<std::size_t>(one.comm->rank)] = one.recv;
  if (++round.arrived < clique.nranks) {
    pending()[one.stream].push_back(&round);
    return ncclSuccess;
  }
  // Every send buffer is still valid: the ranks wait for their streams before reusing them.
  for (std::size_t to = 0; to < ranks; ++to) {
    for (std::size_t from = 0; from < ranks; ++from) {
      std::memcpy(static_cast<char*>(round.recvs[to]) + from * one.bytes, round.sends[from], one.bytes);
    }
  }
  round.complete = true;
  return ncclSuccess;
}

std::string describeShape(const CollectiveShape& shape) {
  std::string text = std::string(shape.function) + " count=" + std::to_string(shape.count) +
                     " datatype=" + std::to_string(shape.type);
  if (shape.op >= 0) text += " op=" + std::to_string(shape.op);
  if (shape.root >= 0) text += " root=" + std::to_string(shape.root);
  return text;
}

bool sameShape(const CollectiveShape& a, const CollectiveShape& b) {
  return std::strcmp(a.function, b.function) == 0 && a.count == b.count && a.type == b.type && a.op == b.op &&
         a.root == b.root;
}

}  // namespace

void sequenceCollective(ncclComm_t comm, const CollectiveShape& shape) {
  if (comm == nullptr || comm->clique == nullptr) return;
  std::string mismatch;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    Clique& clique = *comm->clique;
    const std::uint64_t index = comm->collectives++;
    if (index >= clique.sequence.size()) {
      clique.sequence.push_back(Clique::Sequenced{shape, comm->rank});
      return;
    }
    const Clique::Sequenced& first = clique.sequence[index];
    if (sameShape(first.shape, shape)) return;
    mismatch = "comm " + hex(comm) + " rank " + std::to_string(comm->rank) + " collective " + std::to_string(index) +
               " is " + describeShape(shape) + ", but rank " + std::to_string(first.rank) + "'s collective " +
               std::to_string(index) + " is " + describeShape(first.shape);
  }
  violation("sequence", mismatch);
}

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
  std::lock_guard<std::mutex> lock(gMutex);
  Clique*& clique = cliques()[key];
  if (clique == nullptr) {
    clique = new Clique();
    clique->nranks = comm->nranks;
  }
  comm->clique = clique->nranks == comm->nranks ? clique : nullptr;
  if (comm->clique != nullptr) clique->members.push_back(comm);
}

void cliqueMemberEnded(ncclComm_t comm) {
  if (comm == nullptr || comm->clique == nullptr) return;
  std::string unequal;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    Clique& clique = *comm->clique;
    if (clique.lengthsChecked || static_cast<int>(clique.members.size()) != clique.nranks) return;
    for (ncclComm_t member : clique.members) {
      if (!member->destroyed.load()) return;  // a rank that never ends it (gone) is never compared
    }
    clique.lengthsChecked = true;
    bool same = true;
    std::string counts;
    for (ncclComm_t member : clique.members) {
      same = same && member->collectives == clique.members.front()->collectives;
      counts += (counts.empty() ? "rank " : ", rank ") + std::to_string(member->rank) + " " +
                std::to_string(member->collectives);
    }
    if (same) return;
    unequal = "the ranks of comm " + hex(comm) + "'s clique made unequal numbers of collectives: " + counts;
  }
  violation("sequence", unequal);
}

ncclResult_t allGather(ncclComm_t comm, const void* send, void* recv, std::size_t bytes, cudaStream_t stream,
                       bool inGroup) {
  if (comm->clique == nullptr) return ncclSuccess;  // recorded only, as without the exchange
  const QueuedGather one{comm, send, recv, bytes, stream};
  if (inGroup) {
    tQueued.push_back(one);
    return ncclSuccess;
  }
  return gather(one);
}

void dropQueuedGathers() { tQueued.clear(); }

ncclResult_t runQueuedGathers() {
  std::vector<QueuedGather> queued;
  queued.swap(tQueued);
  ncclResult_t result = ncclSuccess;
  for (const QueuedGather& one : queued) {
    const ncclResult_t ran = gather(one);
    if (result == ncclSuccess) result = ran;
  }
  return result;
}

}  // namespace standin

// Asked by the fake CUDA runtime's stream queries (tests/fake_cuda/): whether an all-gather of
// ours on `stream` still waits for a rank.
extern "C" int standinStreamBusy(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(standin::gMutex);
  auto it = standin::pending().find(stream);
  if (it == standin::pending().end()) return 0;
  std::vector<const standin::Clique::Round*>& rounds = it->second;
  rounds.erase(std::remove_if(rounds.begin(), rounds.end(),
                              [](const standin::Clique::Round* round) { return round->complete; }),
               rounds.end());
  if (!rounds.empty()) return 1;
  standin::pending().erase(it);
  return 0;
}
