// The stand-in NCCL's groups, queries and collectives. Collectives only record: there is
// no device, and the buffers are never touched; but under STANDIN_NCCL_EXCHANGE=1 the
// all-gathers of one clique gather (standin_exchange.cc).
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "standin_nccl.h"

namespace {

using standin::CallLine;
namespace calls = standin::calls;

thread_local int tGroupDepth = 0;
// Splits and shrinks of the open group: written into the caller's slot at its outermost end.
thread_local std::vector<std::pair<ncclComm_t*, ncclComm_t>> tFilledAtGroupEnd;

ncclResult_t collective(CallLine line, ncclComm_t comm, const char* function) {
  standin::delayIfAsked(function);
  const ncclResult_t normal = standin::checkComm(comm, line);
  return standin::finish(line, function, normal);
}

ncclResult_t intQuery(const char* function, ncclComm_t comm, int* out, int ncclComm::*field) {
  CallLine line = calls::query(function, comm, out);
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess && out == nullptr) normal = ncclInvalidArgument;
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

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  CallLine line = calls::query("ncclCommGetAsyncError", comm, asyncError);
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess && asyncError == nullptr) normal = ncclInvalidArgument;
  if (normal == ncclSuccess) {
    int left = comm->pendingPolls.load();
    while (left > 0 && !comm->pendingPolls.compare_exchange_weak(left, left - 1)) {
    }
    *asyncError = left > 0 ? ncclInProgress : ncclSuccess;
    line.value("value", *asyncError);
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
  if (tGroupDepth == 0 && normal == ncclSuccess) normal = standin::runQueuedGathers();
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
    if (tGroupDepth == 0) standin::dropQueuedGathers();
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
  return collective(calls::allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream), comm, "ncclAllReduce");
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(calls::broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream), comm, "ncclBroadcast");
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return collective(calls::reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream), comm, "ncclReduce");
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  CallLine line = calls::allGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
  standin::delayIfAsked("ncclAllGather");
  ncclResult_t normal = standin::checkComm(comm, line);
  if (normal == ncclSuccess) {
    normal = standin::allGather(comm, sendbuff, recvbuff, sendcount * typeBytes(datatype), stream, tGroupDepth > 0);
  }
  return standin::finish(line, "ncclAllGather", normal);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(calls::reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream), comm,
                    "ncclReduceScatter");
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return collective(calls::send(sendbuff, count, datatype, peer, comm, stream), comm, "ncclSend");
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return collective(calls::recv(recvbuff, count, datatype, peer, comm, stream), comm, "ncclRecv");
}

}  // extern "C"

namespace standin {

bool fillAtGroupEnd(ncclComm_t* slot, ncclComm_t made) {
  if (tGroupDepth == 0) return false;
  tFilledAtGroupEnd.emplace_back(slot, made);
  return true;
}

}  // namespace standin
