// NCCL's call arguments in the engine's terms. Out-of-range enum values (a caller's bug)
// map to "not ours", so the call reaches NCCL, which reports the error.
#pragma once

#include <nccl.h>

#include <optional>

#include "../kernels/all_reduce.h"

namespace car {

inline std::optional<ElementType> elementTypeOf(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return ElementType::Float16;
    case ncclBfloat16: return ElementType::BFloat16;
    case ncclFloat32: return ElementType::Float32;
    default: return std::nullopt;
  }
}

inline bool isSum(ncclRedOp_t op) { return op == ncclSum; }

}  // namespace car
