// Scenario "movers-matrix": all-gathers and reduce-scatters on a 1-rank communicator (never
// ours), for every reason to forward one and the forms a rank-aware caller makes: every type,
// the reduce-scatter's ops in range and not, counts 0, odd, at and past the limits and ones whose
// bytes would overflow, misaligned buffers and NCCL's in-place forms. Each must reach NCCL
// once, unchanged. Setup traffic is expected only in "init".
#include <climits>
#include <cstdint>
#include <string>

#include "driver_common.h"

namespace driver {
namespace {

int gCount = 0;

void ag(const std::string& label, const void* send, void* recv, std::size_t count, ncclDataType_t type,
        ncclComm_t comm) {
  step("ag." + label, standin::calls::allGather(send, recv, count, type, comm, fakeStream()),
       [&] { return ncclAllGather(send, recv, count, type, comm, fakeStream()); });
  ++gCount;
}

void rs(const std::string& label, const void* send, void* recv, std::size_t count, ncclDataType_t type,
        ncclRedOp_t op, ncclComm_t comm) {
  step("rs." + label, standin::calls::reduceScatter(send, recv, count, type, op, comm, fakeStream()),
       [&] { return ncclReduceScatter(send, recv, count, type, op, comm, fakeStream()); });
  ++gCount;
}

}  // namespace

int runMoversMatrix() {
  ncclComm_t comm = initRank("init", uniqueId("uid"));
  char* send = gSend;
  char* recv = gRecv;
  for (long long type = 0; type < 12; ++type) {
    const auto t = static_cast<ncclDataType_t>(static_cast<int>(type));
    ag("type." + std::to_string(type), send, recv, 256, t, comm);
    rs("type." + std::to_string(type), send, recv, 256, t, ncclSum, comm);
  }
  for (long long type : {12LL, 99LL, -1LL}) {
    const auto t = static_cast<ncclDataType_t>(static_cast<int>(type));
    ag("type." + std::to_string(type), send, recv, 256, t, comm);
    rs("type." + std::to_string(type), send, recv, 256, t, ncclSum, comm);
  }
  for (long long op : {1LL, 2LL, 3LL, 4LL, 5LL, 127LL, -1LL, static_cast<long long>(INT_MIN)}) {
    rs("op." + std::to_string(op), send, recv, 256, ncclFloat32, static_cast<ncclRedOp_t>(static_cast<int>(op)), comm);
  }
  // An all-gather has no op: whatever a caller's ncclRedOp_t slot would hold is not read.
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1001},
                            std::size_t{1} << 18, (std::size_t{1} << 18) + 1, SIZE_MAX / 2, SIZE_MAX}) {
    ag("count." + std::to_string(count), send, recv, count, ncclFloat32, comm);
    rs("count." + std::to_string(count), send, recv, count, ncclFloat32, ncclSum, comm);
  }
  ag("count0.null", nullptr, nullptr, 0, ncclFloat32, comm);
  rs("count0.null", nullptr, nullptr, 0, ncclFloat32, ncclSum, comm);
  ag("misaligned.send.2", send + 2, recv, 255, ncclFloat16, comm);
  ag("misaligned.recv.6", send, recv + 6, 255, ncclFloat16, comm);
  rs("misaligned.send.4", send + 4, recv, 255, ncclFloat32, ncclSum, comm);
  rs("misaligned.recv.8", send, recv + 8, 255, ncclFloat32, ncclSum, comm);
  // NCCL's in-place forms for a 1-rank communicator: our part of the other buffer is all of it.
  ag("inplace", recv, recv, 256, ncclFloat32, comm);
  rs("inplace", send, send, 256, ncclFloat32, ncclSum, comm);
  report("matrix", "calls", std::to_string(gCount));
  release("destroy", "ncclCommDestroy", comm);
  return 0;
}

}  // namespace driver
