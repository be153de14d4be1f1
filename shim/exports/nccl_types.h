// NCCL's call arguments in the engine's terms. Out-of-range enum values (a caller's bug)
// map to "not ours", so the call reaches NCCL, which reports the error. Each hooked
// collective's arguments become the engine's call here, and nowhere else.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <optional>

#include "../kernels/all_reduce.h"
#include "rank_engine.h"

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

// ncclAllReduce's arguments (less the communicator) as the engine's call. Whether the
// buffers lie in symmetric windows is for the caller to add: only it knows the windows.
inline AllReduceCall allReduceCallOf(const void* sendbuff, void* recvbuff, std::size_t count, ncclDataType_t datatype,
                                     ncclRedOp_t op, cudaStream_t stream) {
  AllReduceCall call;
  call.type = elementTypeOf(datatype);
  call.op = reduceOpOf(op);
  call.count = count;
  call.send = sendbuff;
  call.recv = recvbuff;
  call.stream = stream;
  return call;
}

}  // namespace car
