// NCCL's call arguments in the engine's terms (shim/exports/nccl_types.h): every type and built-in op
// NCCL 2.28 defines maps to ours with the same element size, and nothing else does.
#include <catch2/catch.hpp>

#include <set>

#include "exports/nccl_types.h"

using namespace car;

namespace {

// NCCL's element sizes, written out from nccl.h's comments, not derived from our table.
std::size_t ncclElementBytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

}  // namespace

TEST_CASE("every NCCL type maps to one of ours, of the same size, each to a different one", "[nccl-types]") {
  std::set<ElementType> seen;
  for (int t = 0; t < static_cast<int>(ncclNumTypes); ++t) {
    const auto type = static_cast<ncclDataType_t>(t);
    CAPTURE(t);
    const std::optional<ElementType> ours = elementTypeOf(type);
    REQUIRE(ours.has_value());
    CHECK(static_cast<std::size_t>(elementBytes(*ours)) == ncclElementBytes(type));
    seen.insert(*ours);
  }
  CHECK(seen.size() == static_cast<std::size_t>(kElementTypeCount));
  CHECK_FALSE(elementTypeOf(static_cast<ncclDataType_t>(ncclNumTypes)).has_value());
  CHECK_FALSE(elementTypeOf(static_cast<ncclDataType_t>(-1)).has_value());
}

TEST_CASE("the built-in ops map to ours; ops NCCL creates at run time do not", "[nccl-types]") {
  CHECK(reduceOpOf(ncclSum) == ReduceOp::Sum);
  CHECK(reduceOpOf(ncclProd) == ReduceOp::Prod);
  CHECK(reduceOpOf(ncclMin) == ReduceOp::Min);
  CHECK(reduceOpOf(ncclMax) == ReduceOp::Max);
  CHECK(reduceOpOf(ncclAvg) == ReduceOp::Avg);
  // ncclRedOpCreatePreMulSum hands out values from ncclNumOps upward.
  CHECK_FALSE(reduceOpOf(static_cast<ncclRedOp_t>(ncclNumOps)).has_value());
  CHECK_FALSE(reduceOpOf(static_cast<ncclRedOp_t>(ncclNumOps + 3)).has_value());
}

TEST_CASE("every type but the floating ones up to 32 bits travels split in the push kernels", "[nccl-types]") {
  for (int t = 0; t < kElementTypeCount; ++t) {
    const auto type = static_cast<ElementType>(t);
    const bool floatUpTo32 = type == ElementType::Float16 || type == ElementType::BFloat16 ||
                             type == ElementType::Float32 || type == ElementType::Float8E4M3 ||
                             type == ElementType::Float8E5M2;
    CAPTURE(elementTypeName(type));
    CHECK(wirePacksPerPack(type) == (floatUpTo32 ? 1 : 2));
  }
}

TEST_CASE("an ncclAllReduce's arguments become the engine's call unchanged", "[nccl-types]") {
  float send[4], recv[4];
  const auto stream = reinterpret_cast<cudaStream_t>(0x1234);
  const AllReduceCall call = allReduceCallOf(send, recv, 4, ncclFloat32, ncclMax, stream);
  CHECK(call.send == send);
  CHECK(call.recv == recv);
  CHECK(call.count == 4);
  CHECK(call.type == ElementType::Float32);
  CHECK(call.op == ReduceOp::Max);
  CHECK(call.stream == stream);
  CHECK_FALSE(call.symmetricBuffers);
  // A caller's bad type and a PreMulSum op reach the policy as "not ours", and so NCCL.
  const AllReduceCall odd = allReduceCallOf(send, recv, 4, static_cast<ncclDataType_t>(ncclNumTypes),
                                            static_cast<ncclRedOp_t>(ncclNumOps), stream);
  CHECK_FALSE(odd.type.has_value());
  CHECK_FALSE(odd.op.has_value());
  const Config config;
  CHECK(planCall({2, true, 90}, odd, config).reason == ForwardReason::Op);
}
