// NCCL's call arguments in the engine's terms. Out-of-range enum values (a caller's bug)
// map to "not ours", so the call reaches NCCL, which reports the error. Each hooked
// collective's arguments become the engine's call here, and nowhere else.
#pragma once

#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>

#include "../kernels/all_reduce.h"
#include "launcher.h"

namespace car {

inline std::optional<ElementType> elementTypeOf(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return ElementType::Int8;
    case ncclUint8: return ElementType::UInt8;
    case ncclInt32: return ElementType::Int32;
    case ncclUint32: return ElementType::UInt32;
    case ncclInt64: return ElementType::Int64;
    case ncclUint64: return ElementType::UInt64;
    case ncclFloat16: return ElementType::Float16;
    case ncclBfloat16: return ElementType::BFloat16;
    case ncclFloat32: return ElementType::Float32;
    case ncclFloat64: return ElementType::Float64;
    case ncclFloat8e4m3: return ElementType::Float8E4M3;
    case ncclFloat8e5m2: return ElementType::Float8E5M2;
    default: return std::nullopt;
  }
}

// The built-in operations. Ops made by ncclRedOpCreatePreMulSum (values from ncclNumOps up)
// carry a scalar only NCCL knows: nullopt, forwarded.
inline std::optional<ReduceOp> reduceOpOf(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return ReduceOp::Sum;
    case ncclProd: return ReduceOp::Prod;
    case ncclMin: return ReduceOp::Min;
    case ncclMax: return ReduceOp::Max;
    case ncclAvg: return ReduceOp::Avg;
    default: return std::nullopt;
  }
}

// A hooked collective's arguments (less the communicator) as the engine's call: ncclAllReduce
// and ncclReduceScatter with their op, ncclAllGather without (`op` is not read). `count` is
// NCCL's: the message for an all-reduce, one rank's part (sendcount, recvcount) for the
// others, whose in-place forms (sendbuff == recvbuff + rank * sendcount for the all-gather,
// recvbuff == sendbuff + rank * recvcount for the reduce-scatter) the kernels handle. Whether
// the buffers lie in symmetric windows is for the caller to add: only it knows the windows.
inline CollectiveCall collectiveCallOf(Collective collective, const void* sendbuff, void* recvbuff,
                                       std::size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                                       cudaStream_t stream) {
  CollectiveCall call;
  call.collective = collective;
  call.type = elementTypeOf(datatype);
  if (reduces(collective)) call.op = reduceOpOf(op);
  call.count = count;
  call.send = sendbuff;
  call.recv = recvbuff;
  call.stream = stream;
  return call;
}

enum class ConfigVerdict {
  Applied,  // the config's settings are in the call; ours may take it
  ForNccl,  // malformed, or naming something only NCCL has: NCCL takes it (and judges it)
};

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
using CollConfig = ncclCollConfig_t;  // the per-call config of ncclAllReduceConfig and its siblings

// Our vendor options of ncclAllReduceConfig (ncclConfigExt_t, which the official NCCL
// ignores): vendorId 0x636172 ("car"). Option 1, kernel: val.s is "auto" (the rule), "nccl"
// (this call goes to NCCL) or a kernel's name ("1shot", "2shot", "1stage", "2stage"), taken
// where that kernel can run the call. Like the rest of the config, the same on every rank.
constexpr int kCarVendorId = 0x636172;
constexpr int kCarOptionKernel = 1;
// At most this many options are read: a circular list, which NCCL forbids, must not hang us.
constexpr int kMostConfigOptions = 64;

// What of ncclAllReduceConfig's config the plan and the launch follow: maxCTAs as the push
// kernels' block bound, the launch-completion event, our kernel option; a selection of NCCL's
// algorithms that NCCL must honour (forceAlgSelection) sends the call to NCCL. The rest
// (minCTAs, nvlsCTAs, cgaClusterSize, CTAPolicy, the profiler tag) shape NCCL's kernels only.
// *unknownOption is set to an option value of ours that names nothing.
inline ConfigVerdict applyCollConfig(const CollConfig* config, CollectiveCall* call, const char** unknownOption) {
  if (config == nullptr) return ConfigVerdict::Applied;
  // Append-only and versioned: every field read here must be inside the caller's struct.
  constexpr std::size_t kFieldsWeRead = offsetof(ncclCollConfig_t, launchCompletionEvent) + sizeof(cudaEvent_t);
  if (config->magic != NCCL_API_MAGIC || config->size < kFieldsWeRead) return ConfigVerdict::ForNccl;
  if (config->algSelection != nullptr && config->algSelection[0] != '\0' && config->forceAlgSelection != 0) {
    return ConfigVerdict::ForNccl;
  }
  if (config->maxCTAs != NCCL_CONFIG_UNDEF_INT) {
    if (config->maxCTAs <= 0) return ConfigVerdict::ForNccl;
    call->maxBlocks = config->maxCTAs;
  }
  call->launchCompletion = config->launchCompletionEvent;
  int options = 0;
  for (const ncclConfigExt_t* ext = config->ext; ext != nullptr && options < kMostConfigOptions; ext = ext->next) {
    ++options;
    if (ext->key.vendorId != kCarVendorId || ext->key.optionId != kCarOptionKernel) continue;
    const char* value = ext->val.s;
    if (value == nullptr || std::strcmp(value, "auto") == 0) continue;
    if (std::strcmp(value, "nccl") == 0) {
      call->ncclRequested = true;
      continue;
    }
    bool named = false;
    for (int a = 0; a < kAlgorithmCount; ++a) {
      if (std::strcmp(value, algorithmName(static_cast<Algorithm>(a))) != 0) continue;
      call->requestedAlgorithm = static_cast<Algorithm>(a);
      named = true;
    }
    if (!named) *unknownOption = value;
  }
  return ConfigVerdict::Applied;
}

// A call's config kept past the call, whose caller keeps it valid only during it: the fields
// copied, the extension list (which only the plan read) dropped.
struct CollConfigCopy {
  bool present = false;
  ncclCollConfig_t value{};
  const ncclCollConfig_t* get() const { return present ? &value : nullptr; }
};

inline CollConfigCopy copyOf(const CollConfig* config) {
  CollConfigCopy copy;
  if (config == nullptr) return copy;
  copy.present = true;
  std::memcpy(&copy.value, config, std::min(config->size, sizeof(copy.value)));
  copy.value.size = sizeof(copy.value);
  copy.value.ext = nullptr;
  return copy;
}
#else
struct CollConfig;  // nccl.h before 2.32 has no per-call config: there is never one

inline ConfigVerdict applyCollConfig(const CollConfig*, CollectiveCall*, const char**) { return ConfigVerdict::Applied; }

struct CollConfigCopy {
  const CollConfig* get() const { return nullptr; }
};
inline CollConfigCopy copyOf(const CollConfig*) { return {}; }
#endif

}  // namespace car
