// The set-up of our side of one rank of one communicator (docs/design.md, "The set-up"):
//   1. started on the calling thread at the set-up point (shim/lifecycle/setup.h): NCCL's
//      answers, a private stream, our board and our record; then the one exchange through
//      NCCL, an all-gather of the records, issued for the whole batch in one group;
//   2. advanced by the set-up worker (shim/lifecycle/setup_worker.h), never waiting for a
//      peer and never calling NCCL: the records judged alike on every rank; for a communicator we may take, the
//      peers' boards attached, our block made and published in our board, the peers'
//      blocks mapped once they publish theirs, our link report published, the reports
//      judged alike; then the ranks agree, through the boards, on the first call our
//      kernels take (shim/handshake/setup_board.h), which calls of the program may also
//      settle between the worker's looks;
//   3. bounded: not settled within NCCL_CAR_SETUP_TIMEOUT_MS of its start, it gives up, with
//      a WARN, and the communicator forwards every call; a rank that gives up or fails says so
//      in its board, so that its peers stop waiting for it, and lets go of what it made at once.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "device_guard.h"
#include "exports/real_nccl.h"
#include "handshake/handshake_exchange.h"
#include "handshake/setup_board.h"
#include "handshake/verdict.h"
#include "ipc/block_memory.h"
#include "ipc/buffer_block.h"
#include "ipc/release_board.h"
#include "lifecycle/communicator.h"

namespace car {

class SetUp {
 public:
  // `deadline`: steady-clock seconds (setupClock()) by which it settles or gives up.
  SetUp(std::shared_ptr<Communicator> comm, double deadline);
  // A block it still holds is retired, never handed to the next communicator: peers may map it.
  ~SetUp();
  SetUp(const SetUp&) = delete;
  SetUp& operator=(const SetUp&) = delete;

  const std::shared_ptr<Communicator>& comm() const { return exchange_.comm; }
  double deadline() const { return deadline_; }
  // Goes as far as it can without waiting for a peer and without calling NCCL; `now` in
  // setupClock() seconds. True once settled: the communicator is Ready, Ineligible or
  // Released, or Agreeing no more. Only ever called from one thread at a time (the worker's).
  bool advance(HandshakeDevice& device, double now);
  bool settled() const { return settled_.load(std::memory_order_acquire); }
  // A step of advance() threw: the peers are told, the communicator goes to NCCL and lets go
  // of what the set-up made. Throws nothing.
  void abandonAfterError(const char* what) noexcept;

 private:
  friend std::vector<std::shared_ptr<SetUp>> startSetUps(const RealNccl& real,
                                                         const std::vector<std::shared_ptr<Communicator>>& comms,
                                                         JoinedCall* joined);
  enum class Stage { Exchanging, AwaitingBlocks, AwaitingReports, Agreeing, Settled };

  // Before the exchange, on the calling thread (which may hold the communicator's gate
  // already: `gateHeld`). False (and settled) when this rank cannot take part in the exchange.
  bool prepare(const RealNccl& real, const Communicator* gateHeld);
  bool learnCommunicator(const RealNccl& real, const Communicator* gateHeld);
  bool openExchange(const DeviceGuard& onDevice);
  void fillRecord();
  void claimBoardAndRoom(HandshakeRecord* record);                  // the board and the block's room
  void abandonBeforeExchange(HandshakeRecord* record, const char* what);  // what that made, on a throw
  // NCCL refused the exchange's group: back to Pending, for the next set-up point.
  void refused();

  void afterRecords();
  bool attachPeerBoards(std::string* problem);
  bool createBlockAndLauncher(std::string* problem);
  bool collectBlocks();
  void mapAndReport();
  void collectReports();
  void followAgreement(double now);

  BoardPage& ownPage() const;
  int rank() const { return comm()->rank(); }
  // Tells the peers this rank will never take a call: a failed report in its board (unless it
  // published its own already) and "never" in the agreement (once it knows rank 0's board).
  void tellPeers(const std::string& problem);
  // tellPeers (with `forPeers`, if given: a report holds a short text), then concludes.
  void fail(const std::string& reason, bool unexpected, const std::string& forPeers = {});
  void giveUp(const char* waitingFor);
  void concludeIneligible(const Verdict& verdict);
  void concludeAgreeing(const Verdict& verdict);
  // What the set-up still holds itself (the communicator's holdings are the caller's).
  Holdings takeOwn();
  // Disposes of what this set-up and its communicator let go of (lifecycle/let_go.h), on the
  // worker, holding no lock.
  void letGoOf(Holdings held);
  void settle();

  ExchangeMember exchange_;
  double deadline_;
  Stage stage_ = Stage::Exchanging;
  std::atomic<bool> settled_{false};
  bool warned_ = false;  // this rank already WARNed about its own failure

  BlockLayout layout_{};                     // our block's, from the settings (fillRecord)
  std::unique_ptr<BlockMemory> memory_;      // room (or kept memory) for our block, until the block holds it
  std::unique_ptr<SysvReleaseBoard> board_;  // ours, until the block holds it
  BoardPage* ownPage_ = nullptr;             // in board_, then in the block's
  BoardPage* rankZeroPage_ = nullptr;        // where the agreement is decided, once attached
  bool reportPublished_ = false;             // our report (good or failed) is in our board
  std::vector<std::unique_ptr<SysvReleaseBoard>> peerBoards_;  // by rank, until the mappings hold them
  std::unique_ptr<BufferBlock> block_;
  std::vector<PublishedBlock> blocks_;
  std::vector<void*> bases_;
  LinkReport report_{};
  std::vector<LinkReport> reports_;
};

// The set-ups of `comms`, each already claimed (SettingUp): everything before the exchange,
// then every exchange in one NCCL group, with `joined` (the caller's own call) in it when
// given. Those that could not take part, and those whose group NCCL refused (back to
// Pending), are settled here; the others are returned, for the set-up worker to advance.
std::vector<std::shared_ptr<SetUp>> startSetUps(const RealNccl& real,
                                                const std::vector<std::shared_ptr<Communicator>>& comms,
                                                JoinedCall* joined = nullptr);

// The clock of set-up deadlines, in seconds.
double setupClock();

}  // namespace car
