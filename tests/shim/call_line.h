// One line of the stand-in NCCL's call log: "ncclName key=value key=value ...".
// The stand-in writes one for every call it receives (plus what it produced and returned);
// the drivers write the line they expect before each call, built by the same functions, so
// a test compares the two field by field. Pointers and communicators are hex, enum values
// plain integers. Values never contain spaces.
#pragma once

#include <nccl.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace standin {

inline std::string hex(const void* pointer) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%" PRIxPTR, reinterpret_cast<std::uintptr_t>(pointer));
  return text;
}

inline std::string idHex(const ncclUniqueId& id) {
  std::string bytes;
  char pair[3];
  for (char c : id.internal) {
    std::snprintf(pair, sizeof(pair), "%02x", static_cast<unsigned char>(c));
    bytes += pair;
  }
  return bytes;
}

class CallLine {
 public:
  explicit CallLine(const char* name) : text_(name) {}
  CallLine& ptr(const char* key, const void* value) { return add(key, hex(value)); }
  CallLine& num(const char* key, long long value) { return add(key, std::to_string(value)); }
  CallLine& size(const char* key, std::size_t value) { return add(key, std::to_string(value)); }
  // Enum values as the int the caller passed (out-of-range values included).
  template <typename Enum>
  CallLine& value(const char* key, Enum e) { return num(key, static_cast<int>(e)); }
  CallLine& id(const char* key, const ncclUniqueId& id) { return add(key, idHex(id)); }
  CallLine& text(const char* key, const char* value) {
    std::string word = value == nullptr ? "(null)" : value;
    for (char& c : word) {
      if (c == ' ' || c == '\n' || c == '\t') c = '_';
    }
    return add(key, word);
  }
  // The config pointer and the one field the shim reads from it.
  CallLine& config(const ncclConfig_t* config) {
    ptr("config", config);
    return config == nullptr ? *this : num("blocking", config->blocking);
  }
  const std::string& str() const { return text_; }

 private:
  CallLine& add(const char* key, const std::string& value) {
    text_ += ' ';
    text_ += key;
    text_ += '=';
    text_ += value;
    return *this;
  }
  std::string text_;
};

// The argument part of every call the stand-in implements, one builder per function.
namespace calls {

inline CallLine getVersion(int* version) { return CallLine("ncclGetVersion").ptr("version", version); }
inline CallLine getUniqueId(ncclUniqueId* id) { return CallLine("ncclGetUniqueId").ptr("uniqueId", id); }
inline CallLine initRank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank) {
  return CallLine("ncclCommInitRank").ptr("comm", comm).num("nranks", nranks).id("commId", id).num("rank", rank);
}
inline CallLine initRankConfig(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, ncclConfig_t* config) {
  return CallLine("ncclCommInitRankConfig").ptr("comm", comm).num("nranks", nranks).id("commId", id)
      .num("rank", rank).config(config);
}
inline CallLine initRankScalable(ncclComm_t* comm, int nranks, int myrank, int nId, ncclUniqueId* ids,
                                 ncclConfig_t* config) {
  CallLine line("ncclCommInitRankScalable");
  line.ptr("newcomm", comm).num("nranks", nranks).num("myrank", myrank).num("nId", nId).ptr("commIds", ids);
  if (ids != nullptr && nId > 0) line.id("commId0", ids[0]);
  return line.config(config);
}
inline CallLine initAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return CallLine("ncclCommInitAll").ptr("comms", comms).num("ndev", ndev).ptr("devlist", devlist);
}
inline CallLine split(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return CallLine("ncclCommSplit").ptr("comm", comm).num("color", color).num("key", key).ptr("newcomm", newcomm)
      .config(config);
}
inline CallLine shrink(ncclComm_t comm, int* exclude, int excludeCount, ncclComm_t* newcomm, ncclConfig_t* config,
                       int flags) {
  return CallLine("ncclCommShrink").ptr("comm", comm).ptr("excludeRanksList", exclude)
      .num("excludeRanksCount", excludeCount).ptr("newcomm", newcomm).config(config).num("shrinkFlags", flags);
}
inline CallLine onComm(const char* name, ncclComm_t comm) { return CallLine(name).ptr("comm", comm); }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
inline CallLine grow(ncclComm_t comm, int nRanks, const ncclUniqueId* id, int rank, ncclComm_t* newcomm,
                     ncclConfig_t* config) {
  return CallLine("ncclCommGrow").ptr("comm", comm).num("nRanks", nRanks).ptr("uniqueId", id).num("rank", rank)
      .ptr("newcomm", newcomm).config(config);
}
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 7)
inline CallLine suspend(ncclComm_t comm, int flags) { return onComm("ncclCommSuspend", comm).num("flags", flags); }
#endif
inline CallLine revoke(ncclComm_t comm, int flags) { return onComm("ncclCommRevoke", comm).num("revokeFlags", flags); }
inline CallLine groupStart() { return CallLine("ncclGroupStart"); }
inline CallLine groupEnd() { return CallLine("ncclGroupEnd"); }
inline CallLine groupSimulateEnd(const ncclSimInfo_t* info) { return CallLine("ncclGroupSimulateEnd").ptr("simInfo", info); }
inline CallLine query(const char* name, ncclComm_t comm, const void* out) {
  return CallLine(name).ptr("comm", comm).ptr("out", out);
}
inline CallLine getErrorString(ncclResult_t result) { return CallLine("ncclGetErrorString").value("code", result); }
inline CallLine getLastError(ncclComm_t comm) { return onComm("ncclGetLastError", comm); }

inline CallLine allReduce(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                          ncclComm_t comm, cudaStream_t stream) {
  return CallLine("ncclAllReduce").ptr("sendbuff", send).ptr("recvbuff", recv).size("count", count)
      .value("datatype", type).value("op", op).ptr("comm", comm).ptr("stream", stream);
}
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
inline CallLine allReduceConfig(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return CallLine("ncclAllReduceConfig").ptr("sendbuff", send).ptr("recvbuff", recv).size("count", count)
      .value("datatype", type).value("op", op).ptr("comm", comm).ptr("stream", stream).ptr("config", config);
}
#endif
inline CallLine broadcast(const void* send, void* recv, std::size_t count, ncclDataType_t type, int root,
                          ncclComm_t comm, cudaStream_t stream) {
  return CallLine("ncclBroadcast").ptr("sendbuff", send).ptr("recvbuff", recv).size("count", count)
      .value("datatype", type).num("root", root).ptr("comm", comm).ptr("stream", stream);
}
inline CallLine reduce(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                       int root, ncclComm_t comm, cudaStream_t stream) {
  return CallLine("ncclReduce").ptr("sendbuff", send).ptr("recvbuff", recv).size("count", count)
      .value("datatype", type).value("op", op).num("root", root).ptr("comm", comm).ptr("stream", stream);
}
inline CallLine allGather(const void* send, void* recv, std::size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                          cudaStream_t stream) {
  return CallLine("ncclAllGather").ptr("sendbuff", send).ptr("recvbuff", recv).size("sendcount", sendcount)
      .value("datatype", type).ptr("comm", comm).ptr("stream", stream);
}
inline CallLine reduceScatter(const void* send, void* recv, std::size_t recvcount, ncclDataType_t type,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return CallLine("ncclReduceScatter").ptr("sendbuff", send).ptr("recvbuff", recv).size("recvcount", recvcount)
      .value("datatype", type).value("op", op).ptr("comm", comm).ptr("stream", stream);
}
inline CallLine send(const void* buff, std::size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                     cudaStream_t stream) {
  return CallLine("ncclSend").ptr("sendbuff", buff).size("count", count).value("datatype", type).num("peer", peer)
      .ptr("comm", comm).ptr("stream", stream);
}
inline CallLine recv(void* buff, std::size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                     cudaStream_t stream) {
  return CallLine("ncclRecv").ptr("recvbuff", buff).size("count", count).value("datatype", type).num("peer", peer)
      .ptr("comm", comm).ptr("stream", stream);
}

}  // namespace calls
}  // namespace standin
