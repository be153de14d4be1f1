// The stand-in NCCL's groups, queries and collectives. Collectives only record: there is
// no device, and the buffers are never touched; but under STANDIN_NCCL_EXCHANGE=1 the
// all-gathers of one clique gather (standin_exchange.cc).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "standin_nccl.h"

namespace {

using standin::CallLine;
namespace calls = standin::calls;

thread_local int tGroupDepth = 0;
// Splits and shrinks of the open group: written into the caller's slot at its outermost end.
thread_local std::vector<std::pair<ncclComm_t*, ncclComm_t>> tFilledAtGroupEnd;
// The open group's collectives, sequenced at its outermost end if it runs (NCCL enqueues a
// group's calls when it ends); the first refusal in it, which the end answers instead; its
// nonblocking communicators with work, each linked to the group's job at the end.
thread_local std::vector<std::pair<ncclComm_t, standin::CollectiveShape>> tGroupCollectives;
thread_local ncclResult_t tGroupError = ncclSuccess;
thread_local std::vector<ncclComm_t> tGroupNonblocking;

void clearGroup() {
  tGroupCollectives.clear();
  tGroupError = ncclSuccess;
  tGroupNonblocking.clear();
}

// The forced result of `function` if STANDIN_NCCL_RESULT_<function> is set, else `normal`.
ncclResult_t resultOf(const char* function, ncclResult_t normal) {
  const std::string name = std::string("STANDIN_NCCL_RESULT_") + function;
  const char* text = std::getenv(name.c_str());
  return text != nullptr && text[0] != '\0' ? static_cast<ncclResult_t>(std::atoi(text)) : normal;
}

// A collective NCCL takes into the communicator's sequence: now, or at the group's end.
// STANDIN_NCCL_ASYNC_JOBS=1: refused while the communicator is still in progress; on a
// nonblocking one outside a group, it is a group of its own: a job, ncclInProgress.
ncclResult_t enqueue(CallLine& line, ncclComm_t comm, const standin::CollectiveShape& shape, ncclResult_t normal,
                     bool* accepted) {
  *accepted = false;
  if (normal == ncclSuccess && standin::stillInProgress(comm)) {
    line.num("inProgress", 1);
    normal = ncclInvalidArgument;  // ncclCommEnsureReady
  }
  const ncclResult_t result = resultOf(shape.function, normal);
  if (result != ncclSuccess && result != ncclInProgress) {
    // ncclGroupErrCheck: the group's end answers the refusal (modelled with the jobs only).
    if (tGroupDepth > 0 && tGroupError == ncclSuccess && standin::asyncJobs()) tGroupError = result;
    return normal;
  }
  *accepted = true;
  if (tGroupDepth > 0) {
    tGroupCollectives.emplace_back(comm, shape);
    if (standin::asyncJobs() && comm->nonblocking) tGroupNonblocking.push_back(comm);
    return normal;
  }
  standin::sequenceCollective(comm, shape);
  if (standin::asyncJobs() && comm->nonblocking && normal == ncclSuccess) {
    standin::linkGroupJob(comm);
    return ncclInProgress;
  }
  return normal;
}

ncclResult_t collective(CallLine line, ncclComm_t comm, const char* function, std::size_t count = 0, int type = 0,
                        int op = -1, int root = -1, bool sequenced = true) {
  standin::delayIfAsked(function);
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess && sequenced) {
    bool accepted = false;
    normal = enqueue(line, comm, standin::CollectiveShape{function, count, type, op, root}, normal, &accepted);
  }
  return standin::finish(line, function, normal);
}

ncclResult_t intQuery(const char* function, ncclComm_t comm, int* out, int ncclComm::*field) {
  CallLine line = calls::query(function, comm, out);
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess && out == nullptr) normal = ncclInvalidArgument;
  if (normal == ncclSuccess && standin::stillInProgress(comm)) {
    line.num("inProgress", 1);
    normal = ncclInvalidArgument;  // ncclCommEnsureReady
  }
  if (normal == ncclSuccess) {
    *out = comm->*field;
    line.num("value", *out);
  }
  return standin::finish(line, function, normal);
}

std::size_t typeBytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 1;  // fp8
  }
}

const char* errorText(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "standin: no error";
    case ncclUnhandledCudaError: return "standin: unhandled cuda error";
    case ncclSystemError: return "standin: unhandled system error";
    case ncclInternalError: return "standin: internal error";
    case ncclInvalidArgument: return "standin: invalid argument";
    case ncclInvalidUsage: return "standin: invalid usage";
    case ncclRemoteError: return "standin: remote process exited or there was a network error";
    case ncclInProgress: return "standin: NCCL operation in progress";
    default: return "standin: unknown result code";
  }
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  CallLine line = calls::getVersion(version);
  ncclResult_t normal = ncclInvalidArgument;
  if (version != nullptr) {
    *version = CAR_NCCL_API_LEVEL;  // this stand-in's release
    line.num("value", *version);
    normal = ncclSuccess;
  }
  return standin::finish(line, "ncclGetVersion", normal);
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  static std::atomic<int> serial{0};
  CallLine line = calls::getUniqueId(uniqueId);
  ncclResult_t normal = ncclInvalidArgument;
  if (uniqueId != nullptr) {
    const int n = ++serial;
    for (std::size_t i = 0; i < sizeof(uniqueId->internal); ++i) {
      uniqueId->internal[i] = static_cast<char>(n * 31 + static_cast<int>(i) * 7);
    }
    line.id("value", *uniqueId);
    normal = ncclSuccess;
  }
  return standin::finish(line, "ncclGetUniqueId", normal);
}

const char* ncclGetErrorString(ncclResult_t result) {
  CallLine line = calls::getErrorString(result);
  const char* text = errorText(result);
  line.text("value", text);
  standin::record(line);
  return text;
}

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 13, 0)
const char* ncclGetLastError(ncclComm_t comm) {
  CallLine line = calls::getLastError(comm);
  const char* text = "standin: last error text";
  line.text("value", text);
  standin::record(line);
  return text;
}
#endif

// As NCCL 2.28.9's (src/init.cc): not a read. The first call that finds the communicator's
// group job done completes it (joins NCCL's thread) and frees it, with nothing to keep a
// second caller out; two callers inside at once is reported.
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  CallLine line = calls::query("ncclCommGetAsyncError", comm, asyncError);
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess && asyncError == nullptr) normal = ncclInvalidArgument;
  if (normal == ncclSuccess) {
    if (comm->asyncQueries.fetch_add(1) > 0) {
      standin::violation("async-error-concurrent",
                         "two threads inside ncclCommGetAsyncError on comm " + standin::hex(comm) + " at once");
    }
    int left = comm->pendingPolls.load();
    while (left > 0 && !comm->pendingPolls.compare_exchange_weak(left, left - 1)) {
    }
    *asyncError = left > 0 ? ncclInProgress : ncclSuccess;
    line.value("value", *asyncError);
    if (*asyncError == ncclSuccess && comm->groupJob.exchange(false)) {
      line.num("jobCompleted", 1);
      // The join of NCCL's thread takes a moment: a second caller in here now would free the
      // job twice.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    comm->asyncQueries.fetch_sub(1);
  }
  return standin::finish(line, "ncclCommGetAsyncError", normal);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return intQuery("ncclCommCount", comm, count, &ncclComm::nranks);
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return intQuery("ncclCommCuDevice", comm, device, &ncclComm::device);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return intQuery("ncclCommUserRank", comm, rank, &ncclComm::rank);
}

ncclResult_t ncclGroupStart() {
  CallLine line = calls::groupStart();
  ++tGroupDepth;
  return standin::finish(line, "ncclGroupStart", ncclSuccess);
}

ncclResult_t ncclGroupEnd() {
  CallLine line = calls::groupEnd();
  ncclResult_t normal = ncclInvalidUsage;  // as NCCL: an end without a start
  if (tGroupDepth > 0) {
    --tGroupDepth;
    normal = ncclSuccess;
  }
  if (tGroupDepth == 0 && normal == ncclSuccess && tGroupError != ncclSuccess) {
    // A call of the group was refused: NCCL runs none of it and answers that.
    normal = tGroupError;
    line.num("refused", 1);
    standin::dropQueuedGathers();
    clearGroup();
  }
  if (tGroupDepth == 0 && normal == ncclSuccess) {
    for (const auto& [comm, shape] : tGroupCollectives) standin::sequenceCollective(comm, shape);
    normal = standin::runQueuedGathers();
    for (ncclComm_t comm : tGroupNonblocking) standin::linkGroupJob(comm);
    if (normal == ncclSuccess && !tGroupNonblocking.empty()) normal = ncclInProgress;
    clearGroup();
  }
  if (tGroupDepth == 0 && !tFilledAtGroupEnd.empty()) {
    std::string filled;
    for (const auto& [slot, made] : tFilledAtGroupEnd) {
      *slot = made;
      filled += (filled.empty() ? "" : ",") + standin::hex(made);
    }
    line.text("filled", filled.c_str());
    tFilledAtGroupEnd.clear();
  }
  return standin::finish(line, "ncclGroupEnd", normal);
}

#if CAR_NCCL_API_LEVEL >= NCCL_VERSION(2, 22, 0)
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  CallLine line = calls::groupSimulateEnd(simInfo);
  ncclResult_t normal = ncclInvalidUsage;  // as NCCL: an end without a start
  if (tGroupDepth > 0) {
    --tGroupDepth;
    normal = ncclSuccess;
    if (tGroupDepth == 0) {
      standin::dropQueuedGathers();
      clearGroup();
    }
    if (simInfo != nullptr) {
      simInfo->estimatedTime = 1.0f;
      line.text("estimate", std::to_string(simInfo->estimatedTime).c_str());
    }
  }
  return standin::finish(line, "ncclGroupSimulateEnd", normal);
}
#endif

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(calls::allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream), comm, "ncclAllReduce",
                    count, datatype, op);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(calls::broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream), comm, "ncclBroadcast",
                    count, datatype, -1, root);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return collective(calls::reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream), comm, "ncclReduce",
                    count, datatype, op, root);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  CallLine line = calls::allGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  standin::delayIfAsked("ncclAllGather");
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess) {
    bool accepted = false;
    normal = enqueue(line, comm, standin::CollectiveShape{"ncclAllGather", sendcount, static_cast<int>(datatype)}, normal, &accepted);
    if (accepted) {
      const ncclResult_t gathered =
          standin::allGather(comm, sendbuff, recvbuff, sendcount * typeBytes(datatype), stream, tGroupDepth > 0);
      if (gathered != ncclSuccess) normal = gathered;
    }
  }
  return standin::finish(line, "ncclAllGather", normal);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(calls::reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream), comm,
                    "ncclReduceScatter", recvcount, datatype, op);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  // Point to point: paired by peer, not sequenced across the clique.
  return collective(calls::send(sendbuff, count, datatype, peer, comm, stream), comm, "ncclSend", 0, 0, -1, -1, false);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return collective(calls::recv(recvbuff, count, datatype, peer, comm, stream), comm, "ncclRecv", 0, 0, -1, -1, false);
}

}  // extern "C"

namespace standin {

bool fillAtGroupEnd(ncclComm_t* slot, ncclComm_t made) {
  if (tGroupDepth == 0) return false;
  tFilledAtGroupEnd.emplace_back(slot, made);
  return true;
}

}  // namespace standin
