// A plain NCCL program, linked against (the stand-in) libnccl.so.2, that makes scripted
// sequences of NCCL calls for the shim tests: shim_driver <scenario> [arguments].
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "driver_common.h"

namespace driver {

// driver_fuzz.cc: "fuzz <seed> <count> [threads]".
int runFuzz(std::uint64_t seed, int count, int threads);

ncclUniqueId uniqueId(const std::string& label) {
  ncclUniqueId id{};
  step(label, standin::calls::getUniqueId(&id), [&] { return ncclGetUniqueId(&id); });
  report(label, "value", standin::idHex(id));
  return id;
}

ncclComm_t initRank(const std::string& label, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  step(label, standin::calls::initRank(&comm, 1, id, 0), [&] { return ncclCommInitRank(&comm, 1, id, 0); });
  report(label, "made", standin::hex(comm));
  return comm;
}

ncclComm_t initRankConfig(const std::string& label, const ncclUniqueId& id, ncclConfig_t* config) {
  ncclComm_t comm = nullptr;
  step(label, standin::calls::initRankConfig(&comm, 1, id, 0, config),
       [&] { return ncclCommInitRankConfig(&comm, 1, id, 0, config); });
  report(label, "made", standin::hex(comm));
  return comm;
}

void pollUntilReady(const std::string& label, ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 100; ++i) {
    const std::string name = label + "." + std::to_string(i);
    const ncclResult_t rc = step(name, standin::calls::query("ncclCommGetAsyncError", comm, &state),
                                 [&] { return ncclCommGetAsyncError(comm, &state); });
    report(name, "value", std::to_string(static_cast<int>(state)));
    if (rc != ncclSuccess || state != ncclInProgress) return;
  }
}

ncclResult_t allReduce(const std::string& label, const void* send, void* recv, std::size_t count,
                       ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm) {
  return step(label, standin::calls::allReduce(send, recv, count, type, op, comm, fakeStream()),
              [&] { return ncclAllReduce(send, recv, count, type, op, comm, fakeStream()); });
}

ncclResult_t release(const std::string& label, const char* function, ncclComm_t comm) {
  const std::string name = function;
  return step(label, standin::calls::onComm(function, comm), [&] {
    if (name == "ncclCommFinalize") return ncclCommFinalize(comm);
    if (name == "ncclCommAbort") return ncclCommAbort(comm);
    return ncclCommDestroy(comm);
  });
}

ncclResult_t groupStart(const std::string& label) {
  return step(label, standin::calls::groupStart(), [] { return ncclGroupStart(); });
}

ncclResult_t groupEnd(const std::string& label) {
  return step(label, standin::calls::groupEnd(), [] { return ncclGroupEnd(); });
}

}  // namespace driver

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string scenario = argc > 1 ? argv[1] : "";
  int status = 2;
  if (scenario == "lifecycle") status = driver::runLifecycle();
  else if (scenario == "groups") status = driver::runGroups();
  else if (scenario == "newer-api") status = driver::runNewerApi();
  else if (scenario == "simulate") status = driver::runGroupSimulate();
  else if (scenario == "allreduce-matrix") status = driver::runAllReduceMatrix(argc > 2 ? argv[2] : "rank1");
  else if (scenario == "movers-matrix") status = driver::runMoversMatrix();
  else if (scenario == "nonhooked") status = driver::runNonHooked();
  else if (scenario == "device-api") status = driver::runDeviceApi();
  else if (scenario == "never-destroyed") {
    status = driver::runNeverDestroyed(argc > 2 && std::string(argv[2]) == "_exit");
  }
  else if (scenario == "badargs") status = driver::runBadArguments();
  else if (scenario == "stop-in-setup" && argc > 2) status = driver::runStopInSetup(argv[2]);
  else if (scenario == "fork") status = driver::runFork();
  else if (scenario == "address-reuse" && argc > 2) status = driver::runAddressReuse(argv[2]);
  else if (scenario == "abort-in-forward") status = driver::runAbortInForward();
  else if (scenario == "plain") status = driver::runPlain();
  else if (scenario == "fork-in-group") status = driver::runForkInGroup();
  else if (scenario == "cycles") status = driver::runCycles(argc > 2 ? std::atoi(argv[2]) : 1000);
  else if (scenario == "threads") {
    status = driver::runThreads(argc > 2 ? std::atoi(argv[2]) : 4, argc > 3 ? std::atoi(argv[3]) : 10);
  } else if (scenario == "fuzz" && argc > 3) {
    status = driver::runFuzz(std::strtoull(argv[2], nullptr, 10), std::atoi(argv[3]), argc > 4 ? std::atoi(argv[4]) : 1);
  } else {
    std::fprintf(stderr, "usage: shim_driver lifecycle|groups|newer-api|simulate|allreduce-matrix [rank1|initall]|"
                         "movers-matrix|nonhooked|device-api|never-destroyed [_exit]|badargs|"
                         "fork|fork-in-group|address-reuse <pnccl|handle>|abort-in-forward|plain|"
                         "threads [threads] [iterations]|cycles [n]|fuzz <seed> <count> [threads]|"
                         "stop-in-setup <ncclCommAbort|ncclCommDestroy|ncclCommFinalize>\n");
  }
  if (status == 0) std::printf("done\n");
  return status;
}
