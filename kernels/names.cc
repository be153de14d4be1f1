// The names the logs, the settings and the tools use for types and ops (the kernels' names
// are their rows in algorithms.h). Host code only, apart from the kernels: a program that
// needs the names (nccl_car_query) does not link a single kernel.
#include "all_reduce.h"

namespace car {

const char* elementTypeName(ElementType type) {
  switch (type) {
    case ElementType::Int8: return "int8";
    case ElementType::UInt8: return "uint8";
    case ElementType::Int32: return "int32";
    case ElementType::UInt32: return "uint32";
    case ElementType::Int64: return "int64";
    case ElementType::UInt64: return "uint64";
    case ElementType::Float16: return "fp16";
    case ElementType::BFloat16: return "bf16";
    case ElementType::Float32: return "fp32";
    case ElementType::Float64: return "fp64";
    case ElementType::Float8E4M3: return "fp8e4m3";
    case ElementType::Float8E5M2: return "fp8e5m2";
    case ElementType::kCount: break;
  }
  return "?";
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::kCount: break;
  }
  return "?";
}

}  // namespace car
