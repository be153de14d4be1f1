// What the scripted NCCL programs share: buffers, a fake stream and the calls every
// scenario makes to get a communicator. The stand-in never touches buffers or streams.
#pragma once

#include <nccl.h>

#include <string>

#include "driver_steps.h"

namespace driver {

// Host buffers, 256-byte aligned so that offsets make exactly the misalignment we want.
alignas(256) inline char gSend[1 << 16];
alignas(256) inline char gRecv[1 << 16];

// A stream handle that is not null, so that passing it through unchanged is visible.
inline cudaStream_t fakeStream() { return reinterpret_cast<cudaStream_t>(static_cast<std::uintptr_t>(0x5a5a000)); }

ncclUniqueId uniqueId(const std::string& label);
ncclComm_t initRank(const std::string& label, const ncclUniqueId& id);
ncclComm_t initRankConfig(const std::string& label, const ncclUniqueId& id, ncclConfig_t* config);
// Polls ncclCommGetAsyncError like a caller of a nonblocking communicator, one step a poll.
void pollUntilReady(const std::string& label, ncclComm_t comm);
ncclResult_t allReduce(const std::string& label, const void* send, void* recv, std::size_t count,
                       ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm);
ncclResult_t release(const std::string& label, const char* function, ncclComm_t comm);
ncclResult_t groupStart(const std::string& label);
ncclResult_t groupEnd(const std::string& label);

// The scenarios, one per command-line word.
int runLifecycle();
int runGroups();
int runGroupSimulate();
int runAllReduceMatrix(const std::string& commKind);
int runMoversMatrix();
int runNonHooked();
int runBadArguments();
int runThreads(int threads, int iterations);
int runCycles(int cycles);
int runStopInSetup(const std::string& function);
int runNewerApi();
int runFork();
int runAddressReuse(const std::string& how);
int runAbortInForward();
int runPlain();
int runForkInGroup();
int runDeviceApi();
int runNeverDestroyed(bool quickExit);

}  // namespace driver
