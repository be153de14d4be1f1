// The handshake's all-gathers (shim/handshake/handshake.cc): every communicator of a batch stages its
// own record in device scratch, all of them all-gather in one NCCL group, and each reads
// every rank's copy back. Each communicator's receive area is zeroed first, so a record
// that never arrived reads as "did not arrive", never as an earlier handshake's bytes.
// Every NCCL call goes through the communicator's gate (shim/lifecycle/nccl_gate.h), and every wait
// ends when an abort, destroy or finalize closes that gate.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "lifecycle/comm_state.h"
#include "handshake/handshake_record.h"
#include "handshake/handshake_scratch.h"
#include "exports/real_nccl.h"
#include "handshake/verdict.h"

namespace car {

// One communicator's part of the batch: scratch for both all-gathers (laid out by
// ScratchLayout), a private stream, and our block until the handshake concludes (it then goes
// to the state, or is retired).
struct BatchMember {
  std::shared_ptr<CommState> state;
  std::unique_ptr<BufferBlock> block;
  std::unique_ptr<BlockMemory> memory;  // room (or kept memory) for our block, until the block holds it
  cudaStream_t stream = nullptr;
  char* scratch = nullptr;
  bool inHandshake = false;   // takes part in the collectives; false if it failed before
  bool deviceBusy = false;    // an all-gather may still write the scratch: never reuse it
  std::string failure;        // why it could not take part, or why a collective failed
  bool warned = false;        // this rank already WARNed about its own failure
  HandshakeRecord record{};
  std::vector<HandshakeRecord> records;
  LinkReport report{};
  std::vector<LinkReport> reports;
  std::vector<void*> bases;
  Verdict verdict;
};

// A member's failure when an abort, destroy or finalize closed its gate.
constexpr const char* kStoppedDuringSetup = "stopped: the communicator was aborted, destroyed or finalized during set-up";


// What the exchange does on the device for one member (a host-memory fake in the CPU tests).
class HandshakeDevice {
 public:
  enum class StreamState { Idle, Busy, Failed };
  virtual ~HandshakeDevice() = default;
  // Copies `bytes` from `data` to scratch + offset and zeroes the receive area, in order on
  // the member's stream, then waits for that stream alone.
  virtual bool stage(BatchMember& member, std::size_t offset, const void* data, std::size_t bytes,
                     std::size_t clearOffset, std::size_t clearBytes) = 0;
  virtual StreamState query(BatchMember& member) = 0;
  // Copies scratch + offset back; the stream is idle.
  virtual bool readBack(BatchMember& member, std::size_t offset, void* out, std::size_t bytes) = 0;
};

struct ExchangeLimits {
  // After an abort closed the gate: how long NCCL gets to stop an all-gather still writing
  // our scratch, before we give the scratch up for lost.
  double drainAfterStopSeconds = 10.0;
};

// The records' exchanges (twice: without, then with the blocks) and the link reports' for
// every member in the handshake.
// A member's failure says why its tables cannot be trusted.
void exchangeRecords(const RealNccl& real, HandshakeDevice& device, std::vector<BatchMember>& members,
                     const ExchangeLimits& limits = {});
void exchangeReports(const RealNccl& real, HandshakeDevice& device, std::vector<BatchMember>& members,
                     const ExchangeLimits& limits = {});

// The CUDA one: DeviceGuard, the member's stream, no device-wide synchronisation.
HandshakeDevice& cudaHandshakeDevice();

// Device scratch for handshakes, reused and never freed: cudaFree waits for the whole
// device, where a kernel of ours on another communicator may be waiting for a peer that is
// itself in this handshake. Null on failure.
char* takeScratch(int device);
void returnScratch(int device, char* scratch);

}  // namespace car
