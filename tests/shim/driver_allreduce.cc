// Scenario "allreduce-matrix [rank1|initall]": one all-reduce for every reason to forward
// (and a few that would be ours on an eligible communicator), on a 1-rank communicator or
// on rank 0 of ncclCommInitAll(2). Setup traffic is expected only in "init".
#include <climits>
#include <cstdint>
#include <string>

#include "driver_common.h"

namespace driver {
namespace {

int gCount = 0;

void ar(const std::string& label, const void* send, void* recv, std::size_t count, ncclDataType_t type,
        ncclRedOp_t op, ncclComm_t comm) {
  allReduce("ar." + label, send, recv, count, type, op, comm);
  ++gCount;
}

ncclRedOp_t opValue(long long value) { return static_cast<ncclRedOp_t>(static_cast<int>(value)); }
ncclDataType_t typeValue(long long value) { return static_cast<ncclDataType_t>(static_cast<int>(value)); }

}  // namespace

int runAllReduceMatrix(const std::string& commKind) {
  ncclComm_t comm = nullptr;
  ncclComm_t pair[2] = {nullptr, nullptr};
  if (commKind == "initall") {
    step("init", standin::calls::initAll(pair, 2, nullptr), [&] { return ncclCommInitAll(pair, 2, nullptr); });
    report("init", "made", standin::hex(pair[0]) + "," + standin::hex(pair[1]));
    comm = pair[0];
  } else {
    comm = initRank("init", uniqueId("uid"));
  }

  constexpr std::size_t kMaxBytes = std::size_t{8} << 20;
  char* send = gSend;
  char* recv = gRecv;
  ar("base", send, recv, 1024, ncclFloat32, ncclSum, comm);
  for (long long op : {1LL, 2LL, 3LL, 4LL, 5LL, 6LL, 127LL, 0x7fffffffLL, -1LL, static_cast<long long>(INT_MIN)}) {
    ar("op." + std::to_string(op), send, recv, 1024, ncclFloat32, opValue(op), comm);
  }
  for (long long type = 0; type < 12; ++type) {
    ar("type." + std::to_string(type), send, recv, 1024, typeValue(type), ncclSum, comm);
  }
  for (long long type : {12LL, 99LL, -1LL, static_cast<long long>(INT_MAX)}) {
    ar("type." + std::to_string(type), send, recv, 1024, typeValue(type), ncclSum, comm);
  }
  ar("count0", send, recv, 0, ncclFloat32, ncclSum, comm);
  ar("count0.null", nullptr, nullptr, 0, ncclFloat32, ncclSum, comm);
  ar("bytes28", send, recv, 7, ncclFloat32, ncclSum, comm);
  ar("bytes8", send, recv, 4, ncclFloat16, ncclSum, comm);
  ar("bytes30", send, recv, 15, ncclBfloat16, ncclSum, comm);
  ar("bytes16", send, recv, 4, ncclFloat32, ncclSum, comm);
  ar("bytes4096", send, recv, 1024, ncclFloat32, ncclSum, comm);
  ar("bytes4112", send, recv, 1028, ncclFloat32, ncclSum, comm);
  ar("bytes8MiB", send, recv, kMaxBytes / 4, ncclFloat32, ncclSum, comm);
  ar("bytes8MiB.bf16", send, recv, kMaxBytes / 2, ncclBfloat16, ncclSum, comm);
  ar("bytes8MiB+16", send, recv, kMaxBytes / 4 + 4, ncclFloat32, ncclSum, comm);
  ar("bytes8MiB+4", send, recv, kMaxBytes / 4 + 1, ncclFloat32, ncclSum, comm);
  ar("huge.fp16", send, recv, SIZE_MAX / 2, ncclFloat16, ncclSum, comm);
  ar("huge.fp32", send, recv, SIZE_MAX, ncclFloat32, ncclSum, comm);
  ar("misaligned.send.4", send + 4, recv, 1024, ncclFloat32, ncclSum, comm);
  ar("misaligned.send.8", send + 8, recv, 1024, ncclFloat32, ncclSum, comm);
  ar("misaligned.recv.4", send, recv + 4, 1024, ncclFloat32, ncclSum, comm);
  ar("misaligned.recv.8", send, recv + 8, 1024, ncclFloat32, ncclSum, comm);
  ar("misaligned.both.2", send + 2, recv + 2, 1024, ncclFloat16, ncclSum, comm);
  ar("aligned.16", send + 16, recv + 16, 1024, ncclFloat32, ncclSum, comm);
  ar("inplace", recv, recv, 1024, ncclFloat32, ncclSum, comm);

  step("ar.nullstream", standin::calls::allReduce(send, recv, 1024, ncclFloat32, ncclSum, comm, nullptr),
       [&] { return ncclAllReduce(send, recv, 1024, ncclFloat32, ncclSum, comm, nullptr); });
  ++gCount;
  report("matrix", "allreduces", std::to_string(gCount));

  if (commKind == "initall") {
    release("destroy.pair0", "ncclCommDestroy", pair[0]);
    release("destroy.pair1", "ncclCommDestroy", pair[1]);
  } else {
    release("destroy", "ncclCommDestroy", comm);
  }
  return 0;
}

}  // namespace driver
