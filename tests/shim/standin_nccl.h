// Internals of the stand-in NCCL (libnccl.so.2 for the shim tests): no GPU, no CUDA calls.
// Every call is appended, one line and one write() each, to the file named by
// STANDIN_NCCL_LOG. STANDIN_NCCL_RESULT_<function>=<int> makes that function return <int>
// (it still does its normal work, e.g. creates the communicator). Nonblocking communicators
// report ncclInProgress to the first STANDIN_NCCL_ASYNC_POLLS (default 2) async-error queries.
// STANDIN_NCCL_DELAY_MS_<function>=<ms> makes that function sleep first (a call slow to
// reach NCCL's own checks). STANDIN_NCCL_EXCHANGE=1 makes the all-gathers of communicators
// made from one unique id in one process really gather (standin_exchange.cc), asynchronously:
// the stream stays busy until every rank has issued its all-gather.
// Built with CAR_NCCL_API_LEVEL=<an older NCCL_VERSION_CODE> it is that older NCCL: it has only
// the functions of that release (shim/exports/nccl_api.def) and ncclGetVersion answers that code.
#pragma once

#include <nccl.h>

#ifndef CAR_NCCL_API_LEVEL
#define CAR_NCCL_API_LEVEL NCCL_VERSION_CODE
#endif

#include <atomic>
#include <cstdint>

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
};

namespace standin {

// Appends " result=<r> tid=<t>" to `line` (which already holds the arguments and what the
// call produced: made=, value=), writes it, and returns r: the result forced for
// `function` by STANDIN_NCCL_RESULT_<function> if set, else `normal`.
ncclResult_t finish(CallLine& line, const char* function, ncclResult_t normal);

// Appends " tid=<t>" and writes the line: for the calls that return a string.
void record(CallLine& line);

ncclComm* newComm(int rank, int nranks, int device, bool nonblocking);

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
