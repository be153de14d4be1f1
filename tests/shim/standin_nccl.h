// Internals of the stand-in NCCL (libnccl.so.2 for the shim tests): no GPU, no CUDA calls.
// Every call is appended, one line and one write() each, to the file named by
// STANDIN_NCCL_LOG. STANDIN_NCCL_RESULT_<function>=<int> makes that function return <int>
// (it still does its normal work, e.g. creates the communicator). Nonblocking communicators
// report ncclInProgress to the first STANDIN_NCCL_ASYNC_POLLS (default 2) async-error queries.
// STANDIN_NCCL_DELAY_MS_<function>=<ms> makes that function sleep first (a call slow to
// reach NCCL's own checks). STANDIN_NCCL_DEVICE (default 0) is every communicator's device, or,
// with STANDIN_NCCL_DEVICE_PER_RANK=1, its rank is. STANDIN_NCCL_EXCHANGE=1 makes the all-gathers of communicators
// made from one unique id in one process really gather (standin_exchange.cc), asynchronously:
// the stream stays busy until every rank has issued its all-gather.
// Built with CAR_NCCL_API_LEVEL=<an older NCCL_VERSION_CODE> it is that older NCCL: it has only
// the functions of that release (shim/exports/nccl_api.def) and ncclGetVersion answers that code.
//
// Rules of NCCL's that a caller broke are reported, each as one stderr line starting with
// "standin: VIOLATION <kind>:" and counted (standinViolations(), exported):
//  - car-thread: any NCCL call made from a thread whose name starts with "car-" (the
//    library's own threads: no thread of ours may call NCCL);
//  - sequence: under STANDIN_NCCL_EXCHANGE=1, the k-th collective a rank's communicator of a
//    clique (the communicators of one unique id) hands NCCL must be the same call (function,
//    count, type, op, root) as every other rank's k-th, all-gathers of the library's own set-up
//    included; a group's collectives count at its end, and a call NCCL refused not at all; once
//    every rank ended its communicator, every rank must have made as many;
//  - async-error-concurrent: two threads inside ncclCommGetAsyncError on one communicator at
//    once (NCCL 2.28.9 completes and frees the linked group job there, unguarded).
// STANDIN_NCCL_ASYNC_JOBS=1: nonblocking communicators behave as NCCL 2.28.9's (src/group.cc,
// src/init.cc, src/enqueue.cc): a group end with work on one (a lone collective is its own
// group) links a group job to it and answers ncclInProgress; the communicator then answers
// ncclInProgress to the next STANDIN_NCCL_ASYNC_POLLS ncclCommGetAsyncError calls (whoever
// makes them), and the first one that answers ncclSuccess completes and frees the job; while
// it is in progress a collective on it is refused with ncclInvalidArgument (inside a group, the
// whole group is: its end answers that), and so are ncclCommCount, ncclCommCuDevice and
// ncclCommUserRank (ncclCommEnsureReady). A nonblocking creation is such a job too.
#pragma once

#include <nccl.h>

#ifndef CAR_NCCL_API_LEVEL
#define CAR_NCCL_API_LEVEL NCCL_VERSION_CODE
#endif

#include <atomic>
#include <cstdint>
#include <string>

#include "call_line.h"

namespace standin {
struct Clique;
}

// The stand-in's communicator. Never freed (destroyed ones stay, marked), so a use after
// destroy is reported instead of being undefined, and addresses are never reused, unless
// STANDIN_NCCL_REUSE_ADDRESSES=1 makes a new one take a destroyed one's, as an allocator may.
struct ncclComm {
  int rank = 0;
  int nranks = 1;
  int device = 0;
  bool nonblocking = false;
  std::atomic<int> pendingPolls{0};
  std::atomic<bool> destroyed{false};
  standin::Clique* clique = nullptr;  // STANDIN_NCCL_EXCHANGE=1 only
  std::uint64_t gathers = 0;          // all-gathers made in the clique
  std::uint64_t collectives = 0;      // collectives sequenced in the clique
  std::atomic<int> asyncQueries{0};   // threads inside ncclCommGetAsyncError on it now
  std::atomic<bool> groupJob{false};  // STANDIN_NCCL_ASYNC_JOBS=1: a group job is linked to it
};

namespace standin {

// Appends " result=<r> tid=<t>" to `line` (which already holds the arguments and what the
// call produced: made=, value=), writes it, and returns r: the result forced for
// `function` by STANDIN_NCCL_RESULT_<function> if set, else `normal`.
ncclResult_t finish(CallLine& line, const char* function, ncclResult_t normal);

// Appends " tid=<t>" and writes the line: for the calls that return a string.
void record(CallLine& line);

ncclComm* newComm(int rank, int nranks, int device, bool nonblocking);

// One broken rule (see the top of this file): "standin: VIOLATION <kind>: <text>" on stderr,
// counted.
void violation(const char* kind, const std::string& text);

// STANDIN_NCCL_ASYNC_JOBS=1.
bool asyncJobs();
// Links a group job to a nonblocking communicator: in progress for the next
// STANDIN_NCCL_ASYNC_POLLS looks.
void linkGroupJob(ncclComm_t comm);
// Whether NCCL 2.28.9 would refuse to use `comm` now (ncclCommEnsureReady): a nonblocking
// communicator whose last operation is still in progress, under STANDIN_NCCL_ASYNC_JOBS=1.
bool stillInProgress(ncclComm_t comm);

// What a collective is, for the sequence of a clique.
struct CollectiveShape {
  const char* function = "";
  std::size_t count = 0;
  int type = 0;
  int op = -1;    // none: -1
  int root = -1;  // none: -1
};
// Under STANDIN_NCCL_EXCHANGE=1, in a clique: the communicator's next collective, compared
// with every other rank's collective at that index (standin_exchange.cc).
void sequenceCollective(ncclComm_t comm, const CollectiveShape& shape);
// `comm` was destroyed or aborted: once every rank's communicator of its clique is, their
// numbers of collectives are compared (a rank that never ends its own is never compared).
void cliqueMemberEnded(ncclComm_t comm);

// ncclInvalidArgument unless comm is a live communicator of ours (logs dead=1 if destroyed).
ncclResult_t checkComm(ncclComm_t comm, CallLine& line);

// Sleeps for STANDIN_NCCL_DELAY_MS_<function> milliseconds, if set.
void delayIfAsked(const char* function);

// STANDIN_NCCL_DEVICE, default 0.
int fakeDevice();

// config->blocking if set, else NCCL_COMM_BLOCKING=0 from the environment, else `inherited`.
bool nonblockingFrom(const ncclConfig_t* config, bool inherited);

// As NCCL does for a split or shrink inside a group: *slot stays NULL until the thread's
// outermost ncclGroupEnd, which writes `made` into it. Returns false outside a group.
bool fillAtGroupEnd(ncclComm_t* slot, ncclComm_t made);

// standin_exchange.cc. Under STANDIN_NCCL_EXCHANGE=1, `comm` joins the clique of `id` (of
// its rank count); otherwise nothing.
void joinClique(ncclComm_t comm, const ncclUniqueId& id);
// In a clique: issues the gather of `bytes` of every rank into `recv` on `stream`, now or,
// `inGroup`, at the thread's outermost group end (runQueuedGathers). Outside one: nothing,
// ncclSuccess.
ncclResult_t allGather(ncclComm_t comm, const void* send, void* recv, std::size_t bytes, cudaStream_t stream,
                       bool inGroup);
ncclResult_t runQueuedGathers();
// A group ended by ncclGroupSimulateEnd runs nothing: its queued all-gathers are dropped.
void dropQueuedGathers();

}  // namespace standin
