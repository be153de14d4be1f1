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
  const CollectiveCall call = collectiveCallOf(Collective::AllReduce, send, recv, 4, ncclFloat32, ncclMax, stream);
  CHECK(call.send == send);
  CHECK(call.recv == recv);
  CHECK(call.count == 4);
  CHECK(call.type == ElementType::Float32);
  CHECK(call.op == ReduceOp::Max);
  CHECK(call.stream == stream);
  CHECK_FALSE(call.symmetricBuffers);
  // A caller's bad type and a PreMulSum op reach the policy as "not ours", and so NCCL.
  const CollectiveCall odd = collectiveCallOf(Collective::AllReduce, send, recv, 4, static_cast<ncclDataType_t>(ncclNumTypes),
                                            static_cast<ncclRedOp_t>(ncclNumOps), stream);
  CHECK_FALSE(odd.type.has_value());
  CHECK_FALSE(odd.op.has_value());
  const Config config;
  CHECK(planCall({2, true, 90}, odd, config).reason == ForwardReason::Op);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
namespace {

CollectiveCall applied(const ncclCollConfig_t* config, ConfigVerdict* verdict, const char** unknown = nullptr) {
  CollectiveCall call = collectiveCallOf(Collective::AllReduce, nullptr, nullptr, 16, ncclFloat32, ncclSum, nullptr);
  const char* ignored = nullptr;
  *verdict = applyCollConfig(config, &call, unknown != nullptr ? unknown : &ignored);
  return call;
}

ncclConfigExt_t kernelOption(const char* value, ncclConfigExt_t* next = nullptr, int vendor = kCarVendorId) {
  ncclConfigExt_t option{};
  option.next = next;
  option.key.vendorId = vendor;
  option.key.optionId = kCarOptionKernel;
  option.val.s = value;
  return option;
}

}  // namespace

TEST_CASE("ncclAllReduceConfig: no config or a default one changes nothing", "[nccl-types][call-config]") {
  ConfigVerdict verdict = ConfigVerdict::ForNccl;
  const CollectiveCall none = applied(nullptr, &verdict);
  CHECK(verdict == ConfigVerdict::Applied);
  const ncclCollConfig_t defaults = NCCL_COLLCONFIG_INITIALIZER;
  const CollectiveCall plain = applied(&defaults, &verdict);
  CHECK(verdict == ConfigVerdict::Applied);
  for (const CollectiveCall* call : {&none, &plain}) {
    CHECK_FALSE(call->ncclRequested);
    CHECK_FALSE(call->requestedAlgorithm.has_value());
    CHECK(call->maxBlocks == 0);
    CHECK(call->launchCompletion == nullptr);
  }
}

TEST_CASE("ncclAllReduceConfig: what only NCCL can judge or serve goes to NCCL", "[nccl-types][call-config]") {
  ConfigVerdict verdict = ConfigVerdict::Applied;
  ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
  config.magic = 0;  // not initialised with NCCL_COLLCONFIG_INITIALIZER: NCCL's error
  applied(&config, &verdict);
  CHECK(verdict == ConfigVerdict::ForNccl);
  config = NCCL_COLLCONFIG_INITIALIZER;
  config.size = offsetof(ncclCollConfig_t, launchCompletionEvent);  // older than the fields we read
  applied(&config, &verdict);
  CHECK(verdict == ConfigVerdict::ForNccl);
  config = NCCL_COLLCONFIG_INITIALIZER;
  config.algSelection = "ring";  // NCCL's own algorithm, forced (forceAlgSelection defaults to 1)
  applied(&config, &verdict);
  CHECK(verdict == ConfigVerdict::ForNccl);
  config.forceAlgSelection = 0;  // a hint only: ours may still take it
  applied(&config, &verdict);
  CHECK(verdict == ConfigVerdict::Applied);
  config = NCCL_COLLCONFIG_INITIALIZER;
  config.maxCTAs = 0;
  applied(&config, &verdict);
  CHECK(verdict == ConfigVerdict::ForNccl);
}

TEST_CASE("ncclAllReduceConfig: maxCTAs, the completion event and our kernel option reach the call",
          "[nccl-types][call-config]") {
  ConfigVerdict verdict = ConfigVerdict::ForNccl;
  ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
  config.maxCTAs = 5;
  config.minCTAs = 2;  // NCCL's channels only
  config.launchCompletionEvent = reinterpret_cast<cudaEvent_t>(0x1234);
  ncclConfigExt_t foreign = kernelOption("nccl", nullptr, kCarVendorId + 1);  // another vendor's: not ours
  ncclConfigExt_t ours = kernelOption("2shot", &foreign);
  config.ext = &ours;
  CollectiveCall call = applied(&config, &verdict);
  CHECK(verdict == ConfigVerdict::Applied);
  CHECK(call.maxBlocks == 5);
  CHECK(call.launchCompletion == reinterpret_cast<cudaEvent_t>(0x1234));
  CHECK(call.requestedAlgorithm == Algorithm::TwoShotPush);
  CHECK_FALSE(call.ncclRequested);

  ncclConfigExt_t toNccl = kernelOption("nccl");
  config.ext = &toNccl;
  CHECK(applied(&config, &verdict).ncclRequested);

  const char* unknown = nullptr;
  ncclConfigExt_t typo = kernelOption("3shot");
  config.ext = &typo;
  call = applied(&config, &verdict, &unknown);
  CHECK(verdict == ConfigVerdict::Applied);
  CHECK_FALSE(call.requestedAlgorithm.has_value());
  REQUIRE(unknown != nullptr);
  CHECK(std::string(unknown) == "3shot");

  // A circular list (which NCCL forbids) is read only so far, and does not hang.
  ncclConfigExt_t loop = kernelOption("auto");
  loop.next = &loop;
  config.ext = &loop;
  call = applied(&config, &verdict);
  CHECK(verdict == ConfigVerdict::Applied);
  CHECK_FALSE(call.requestedAlgorithm.has_value());
}
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
TEST_CASE("ncclAllReduceConfig: a config kept for a group's end is a copy without the extension list",
          "[nccl-types][call-config]") {
  CHECK(copyOf(nullptr).get() == nullptr);
  ncclConfigExt_t option = kernelOption("1shot");
  CollConfigCopy copy;
  {
    ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
    config.maxCTAs = 7;
    config.ext = &option;
    copy = copyOf(&config);
    config.maxCTAs = 1;  // the caller's changes after the call do not reach the copy
  }
  REQUIRE(copy.get() != nullptr);
  CHECK(copy.get()->maxCTAs == 7);
  CHECK(copy.get()->magic == NCCL_API_MAGIC);
  CHECK(copy.get()->size == sizeof(ncclCollConfig_t));
  CHECK(copy.get()->ext == nullptr);
}
#endif
