// The set-up's one exchange through NCCL (shim/handshake/handshake.cc): every communicator of
// a batch stages its own record in device scratch, all of them all-gather in one NCCL group,
// and each reads every rank's copy back once its all-gather has completed. Nothing here
// waits for a peer: the exchange is issued on the program's thread, inside a hook, then
// polled by the set-up worker, which never calls NCCL: whether NCCL has launched a
// nonblocking group it learns from the calls NCCL accepted since (Communicator::
// noteNcclAccepted), then it asks our own stream. Each receive area is zeroed first, so a
// record that never arrived reads as "did not arrive", never as an earlier set-up's bytes.
// Every NCCL call goes through the communicator's gate (shim/lifecycle/call_gate.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exports/real_nccl.h"
#include "handshake/handshake_record.h"
#include "handshake/handshake_scratch.h"
#include "lifecycle/communicator.h"

namespace car {

// One communicator's part of the exchange: its scratch, its private stream, our record and,
// once gathered, everyone's.
struct ExchangeMember {
  std::shared_ptr<Communicator> comm;
  cudaStream_t stream = nullptr;
  char* scratch = nullptr;
  bool issued = false;      // its all-gather went to NCCL (with its group)
  bool refused = false;     // NCCL refused its all-gather, so the group: nothing of it entered NCCL's sequence
  bool launched = false;    // NCCL put the all-gather on the stream (nonblocking: NCCL's thread did)
  // A group that ended in progress: NCCL's calls accepted on the communicator when it ended.
  // Once NCCL accepts another, its thread has launched the group.
  std::uint64_t acceptedAtIssue = 0;
  bool deviceBusy = false;  // an all-gather may still write the scratch, or still be launched on
                            // the stream: neither may ever be reused or destroyed
  std::string failure;      // why its records cannot be trusted
  HandshakeRecord record{};
  std::vector<HandshakeRecord> records;
};

// A member's failure when an abort, destroy or finalize closed its gate.
constexpr const char* kStoppedDuringSetup = "stopped: the communicator was aborted, destroyed or finalized during set-up";

// What the exchange does on the device for one member (a host-memory fake in the CPU tests).
class HandshakeDevice {
 public:
  enum class StreamState { Idle, Busy, Failed };
  virtual ~HandshakeDevice() = default;
  // Copies `bytes` from `data` to scratch + offset and zeroes the receive area, in order on
  // the member's stream, then waits for that stream alone (nothing of NCCL's is on it yet).
  virtual bool stage(ExchangeMember& member, std::size_t offset, const void* data, std::size_t bytes,
                     std::size_t clearOffset, std::size_t clearBytes) = 0;
  virtual StreamState query(ExchangeMember& member) = 0;
  // Copies scratch + offset back; the stream is idle.
  virtual bool readBack(ExchangeMember& member, std::size_t offset, void* out, std::size_t bytes) = 0;
};

// The caller's own call at a set-up point, issued in the exchange's group: NCCL refuses a
// call on a nonblocking communicator while its last one is still in progress, and waiting
// for that would wait for the peers.
struct JoinedCall {
  std::function<ncclResult_t()> issue;
  const Communicator* gateHeld = nullptr;  // whose gate the caller holds already
  ncclResult_t result = ncclSuccess;    // what issue() returned
  ncclResult_t ended = ncclSuccess;     // what ended the group it went in (ncclSuccess when alone)
  // What the caller's call returns, as NCCL would answer it alone: its own error, else the group's end.
  ncclResult_t answer() const { return result != ncclSuccess ? result : ended; }
};

// Stages every member's record, then issues every member's all-gather in one NCCL group (and
// `joined`, if given, inside it). Returns what ended the group. A member whose all-gather NCCL
// refused (a communicator still being created: the whole group is refused with it, and
// nothing of it entered NCCL's sequence) is `refused`; one whose gate was closed, whose
// staging failed, or whose group NCCL gave up at its end after taking the all-gather (a
// broken communicator) has its failure set. Waits for nothing but our own staging copies.
ncclResult_t issueExchange(const RealNccl& real, HandshakeDevice& device, const std::vector<ExchangeMember*>& members,
                           JoinedCall* joined = nullptr);

enum class ExchangeProgress { Pending, Done, Failed };

// Without waiting and without calling NCCL: whether the member's all-gather has completed
// (Done: `records` read back), is still on its way (Pending: NCCL has not launched it yet, or
// it runs), or cannot complete (Failed: `failure` says why).
ExchangeProgress pollExchange(HandshakeDevice& device, ExchangeMember& member);

// The CUDA one: DeviceGuard, the member's stream, no device-wide synchronisation.
HandshakeDevice& cudaHandshakeDevice();

// Device scratch for exchanges, reused and never freed: cudaFree waits for the whole
// device, where a kernel of ours on another communicator may be waiting for a peer that is
// itself in this set-up. Null on failure.
char* takeScratch(int device);
void returnScratch(int device, char* scratch);

}  // namespace car
