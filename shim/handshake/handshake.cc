#include "handshake/handshake.h"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "cuda_check.h"
#include "device_guard.h"
#include "exports/fault_injection.h"
#include "exports/shim_config.h"
#include "handshake/host_identity.h"
#include "handshake/p2p_limit.h"
#include "handshake/relaxed_capture.h"
#include "handshake/topology.h"
#include "ipc/block_budget.h"
#include "ipc/block_retirement.h"
#include "lifecycle/let_go.h"
#include "log.h"

namespace car {
namespace {

void copyText(char* field, std::size_t size, const std::string& value) {
  std::strncpy(field, value.c_str(), size - 1);
  field[size - 1] = '\0';
}

// One log line for a verdict that keeps the communicator NCCL's: a WARN for a fault or a
// misconfiguration, nothing more for a set-up we simply do not serve (the INFO line follows).
void warnVerdict(const Communicator& comm, const Verdict& verdict, bool alreadyWarned) {
  if (verdict.differingVariable != nullptr) {
    CAR_WARN(comm.device(), "{}: {}; set it the same on every rank. All-reduces go to NCCL.", describe(comm),
             verdict.reason);
  } else if (verdict.unexpected && !alreadyWarned) {
    CAR_WARN(comm.device(), "{}: {}. All-reduces go to NCCL.", describe(comm), verdict.reason);
  }
}

// Where each rank's block lives, from the records.
std::vector<PeerLocation> peerLocations(const std::vector<HandshakeRecord>& records, int myRank) {
  std::vector<PeerLocation> peers(records.size());
  for (std::size_t r = 0; r < records.size(); ++r) {
    peers[r].sameProcess = sameProcess(records[static_cast<std::size_t>(myRank)], records[r]);
    peers[r].cudaDevice = records[r].cudaDevice;
    peers[r].busId = fieldText(records[r].busId);
  }
  return peers;
}

// What the communicator let go of, with what the set-up still held itself.
Holdings together(Holdings own, Holdings fromComm) {
  if (!own.launcher) own.launcher = std::move(fromComm.launcher);
  if (!own.block) own.block = std::move(fromComm.block);
  return own;
}

Verdict refusal(const std::string& reason, bool unexpected) {
  Verdict verdict;
  verdict.reason = reason;
  verdict.unexpected = unexpected;
  return verdict;
}

}  // namespace

double setupClock() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

SetUp::SetUp(std::shared_ptr<Communicator> comm, double deadline) : deadline_(deadline) {
  exchange_.comm = std::move(comm);
}

SetUp::~SetUp() {
  // Every ending lets go before this; a block still here (a set-up dropped on an error) may
  // be mapped by peers: retired, never handed to the next communicator as it is.
  if (block_) letGoOf(takeOwn());
}

// ---- Before the exchange: the calling thread.

bool SetUp::learnCommunicator(const RealNccl& real, const Communicator* gateHeld) {
  Communicator& state = *exchange_.comm;
  int rank = 0, ranks = 0, device = 0;
  bool known = false;
  const auto ask = [&] {
    known = real.commUserRank(state.comm(), &rank) == ncclSuccess &&
            real.commCount(state.comm(), &ranks) == ncclSuccess &&
            real.commCuDevice(state.comm(), &device) == ncclSuccess;
  };
  bool asked = true;
  if (gateHeld == &state) ask();
  else asked = state.gate().pass(ask);
  if (!asked) {
    concludeIneligible(refusal(kStoppedDuringSetup, false));
    return false;
  }
  if (!known) {
    // NCCL refuses to answer for a communicator it has not finished creating: it would
    // refuse the program's call as well, so this call never enters NCCL's sequence. The next
    // set-up point tries again (shim/lifecycle/setup.h).
    CAR_INFO(-1, "{}: NCCL does not answer for the communicator yet (still being created?); its set-up waits for "
             "its next call outside a group and a graph capture", describe(state));
    state.lock().exchangeRefused();
    settle();
    return false;
  }
  state.learnIdentity(rank, ranks, device);
  if (!takesWorldSize(ranks)) {
    // Every rank sees the same count, so every rank skips the exchange alike.
    concludeIneligible(refusal(worldSizeRefusal(ranks), false));
    return false;
  }
  return true;
}

// The exchange's own stream and scratch, on the communicator's device (`onDevice`).
bool SetUp::openExchange(const DeviceGuard& onDevice) {
  Communicator& state = *exchange_.comm;
  cudaError_t error = onDevice.error();
  if (error == cudaSuccess) error = cudaStreamCreateWithFlags(&exchange_.stream, cudaStreamNonBlocking);
  if (error == cudaSuccess && (exchange_.scratch = takeScratch(state.device())) != nullptr) return true;
  cudaGetLastError();
  // The cause as nccl-car doctor names it on the same machine (no driver, no device, ...).
  const std::string why = error == cudaSuccess ? "no memory for its scratch" : cudaUnusableReason(error);
  const std::string reason = "CUDA unusable for the set-up: " + why;
  CAR_WARN(state.device(), "{}: {}; the peers' set-up cannot complete. All-reduces go to NCCL.", describe(state),
           reason);
  warned_ = true;
  concludeIneligible(refusal(reason, true));
  return false;
}

// Our record: who we are, where, with which settings, and where our board is. A device that
// cannot be asked makes the status NoDevice; no board, NoBoard; no room for one more block
// under NCCL_CAR_GPU_MEMORY_BYTES, NoRoom.
void SetUp::fillRecord() {
  const Communicator& state = *exchange_.comm;
  const ProcessIdentity& self = processIdentity();
  HandshakeRecord& record = exchange_.record;
  record.magic = kHandshakeMagic;
  record.status = RankStatus::Ready;
  record.rank = state.rank();
  record.ranks = state.ranks();
  record.pid = self.pid;
  record.cudaDevice = state.device();
  record.ipcNamespace = self.ipcNamespace;
  record.pidNamespace = self.pidNamespace;
  record.settings = sharedSettingsOf(setupConfig(state.device()));
  record.p2pLimit = static_cast<std::int32_t>(ncclP2pLimit());
  record.boardId = -1;
  copyText(record.host, sizeof(record.host), self.host);
  int major = 0, minor = 0;
  if (cudaDeviceGetPCIBusId(record.busId, sizeof(record.busId), state.device()) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, state.device()) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, state.device()) != cudaSuccess) {
    cudaGetLastError();
    record.status = RankStatus::NoDevice;
  }
  record.computeCapability = major * 10 + minor;
  if (record.status != RankStatus::Ready) return;
  // Whatever throws here (the board's bookkeeping, the pool's), this rank still sends its
  // record: its peers have their exchange in NCCL already, and would pair it with this rank's
  // next collective.
  try {
    claimBoardAndRoom(&record);
  } catch (const std::exception& error) {
    abandonBeforeExchange(&record, error.what());
  } catch (...) {
    abandonBeforeExchange(&record, "an unknown exception");
  }
}

void SetUp::abandonBeforeExchange(HandshakeRecord* record, const char* what) {
  const Communicator& state = *exchange_.comm;
  ownPage_ = nullptr;
  memory_.reset();
  board_.reset();
  record->status = RankStatus::Failed;
  record->boardId = -1;
  CAR_WARN(state.device(), "{}: internal error before the set-up's exchange ({}); all-reduces go to NCCL",
           describe(state), what);
  warned_ = true;
}

void SetUp::claimBoardAndRoom(HandshakeRecord* recordOut) {
  const Communicator& state = *exchange_.comm;
  HandshakeRecord& record = *recordOut;
  std::string problem;
  board_ = SysvReleaseBoard::create(&problem);
  if (!board_) {
    record.status = RankStatus::NoBoard;
    CAR_WARN(state.device(), "{}: {}; all-reduces go to NCCL", describe(state), problem);
    warned_ = true;
    return;
  }
  ownPage_ = &board_->page();
  record.boardId = board_->id();
  record.boardToken = board_->token();
  if (faultFires(Fault::RecordThrow, state.rank())) throw std::runtime_error("NCCL_CAR_TEST_FAULT record-throw");
  // Room for our block, before any rank allocates one: every rank learns from the records
  // whether all have it. Blocks kept at a release because a peer still mapped them may be
  // free by now: into the pool first, where this claim can take one. Neither waits for the
  // device: what must be freed is freed by the set-up worker (shim/ipc/block_memory.h).
  blockRetirement().sweep();
  layout_ = blockLayoutFor(setupConfig(state.device()));
  layout_.totalBytes += faultBlockGrowth(state.rank());  // NCCL_CAR_TEST_FAULT=grow-block
  memory_ = BlockMemory::claim(blockMemoryPool(), state.device(), layout_.totalBytes, shimConfig().gpuMemoryBytes);
  if (!memory_) record.status = RankStatus::NoRoom;
}

bool SetUp::prepare(const RealNccl& real, const Communicator* gateHeld) {
  if (!learnCommunicator(real, gateHeld)) return false;
  DeviceGuard guard(exchange_.comm->device());  // what follows runs on the communicator's device
  if (!openExchange(guard)) return false;
  // From here on this rank takes part in the exchange whatever fails (the record's status
  // says so), so that its peers are not left waiting.
  fillRecord();
  return true;
}

std::vector<std::shared_ptr<SetUp>> startSetUps(const RealNccl& real,
                                                const std::vector<std::shared_ptr<Communicator>>& comms,
                                                JoinedCall* joined) {
  const double deadline = setupClock() + static_cast<double>(shimConfig().setupTimeoutMs) / 1000.0;
  const RelaxedCaptureScope relaxed;
  std::vector<std::shared_ptr<SetUp>> exchanging;
  std::vector<ExchangeMember*> members;
  for (const std::shared_ptr<Communicator>& comm : comms) {
    auto setUp = std::make_shared<SetUp>(comm, deadline);
    if (!setUp->prepare(real, joined != nullptr ? joined->gateHeld : nullptr)) continue;  // settled: nothing sent
    members.push_back(&setUp->exchange_);
    exchanging.push_back(std::move(setUp));
  }
  if (!members.empty()) {
    issueExchange(real, cudaHandshakeDevice(), members, joined);
  } else if (joined != nullptr) {
    joined->result = joined->issue();  // nothing of ours to go with it (one rank, no GPU): alone, as it came
  }
  std::vector<std::shared_ptr<SetUp>> issued;
  for (std::shared_ptr<SetUp>& setUp : exchanging) {
    if (setUp->exchange_.refused) setUp->refused();
    else issued.push_back(std::move(setUp));
  }
  return issued;
}

void SetUp::refused() {
  Communicator& comm = *exchange_.comm;
  CAR_INFO(comm.device(), "{}: NCCL refused the set-up's exchange; it goes to NCCL again with the communicator's "
           "next call outside a group and a graph capture", describe(comm));
  comm.lock().exchangeRefused();
  letGoOf(takeOwn());  // a board and a claim: nothing was published
  settle();
}

// ---- After the exchange: the set-up worker.

BoardPage& SetUp::ownPage() const { return *ownPage_; }

bool SetUp::attachPeerBoards(std::string* problem) {
  const std::vector<HandshakeRecord>& records = exchange_.records;
  peerBoards_.clear();
  peerBoards_.resize(records.size());
  for (std::size_t p = 0; p < records.size(); ++p) {
    if (static_cast<int>(p) == rank()) continue;
    std::string why;
    peerBoards_[p] = SysvReleaseBoard::attach(records[p].boardId, records[p].boardToken, &why);
    if (!peerBoards_[p]) {
      *problem = fmt::format("rank {}'s board: {}", p, why);
      peerBoards_.clear();
      return false;
    }
  }
  rankZeroPage_ = rank() == 0 ? ownPage_ : &peerBoards_[0]->page();
  return true;
}

// The launcher, and the block's memory and IPC handle.
bool SetUp::createBlockAndLauncher(std::string* problem) {
  Communicator& comm = *exchange_.comm;
  DeviceGuard guard(comm.device());
  block_ = BufferBlock::create(std::move(board_));
  EngineOptions options;
  options.device = comm.device();
  options.rank = comm.rank();
  options.ranks = comm.ranks();
  options.config = setupConfig(comm.device());
  std::unique_ptr<Launcher> launcher;
  cudaError_t err = faultActive(Fault::NoBuffers) ? cudaErrorMemoryAllocation : Launcher::create(options, &launcher);
  if (err == cudaSuccess) err = block_->allocate(std::move(memory_), layout_, exchange_.stream);
  if (err != cudaSuccess) {
    cudaGetLastError();
    *problem = fmt::format("could not allocate or export its buffers ({})", cudaGetErrorString(err));
    return false;  // the launcher goes here: none of its kernels ever ran
  }
  if (faultFires(Fault::SlowLauncher, comm.rank())) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kSlowRetireSeconds));
  }
  // Released meanwhile: its release took no launcher, so this one goes here (outside the
  // lock); the set-up's next step sees the release and lets go of the rest.
  Holdings unused;
  unused.launcher = comm.lock().installLauncher(std::move(launcher));
  if (unused) letGoOf(std::move(unused));
  return true;
}

// The records, the same bytes on every rank, judged alike everywhere: a communicator we do
// not take allocates nothing and attaches no board.
void SetUp::afterRecords() {
  const Verdict verdict = judgeRecords(exchange_.records);
  if (!verdict.eligible) {
    concludeIneligible(verdict);
    return;
  }
  std::string problem;
  if (!attachPeerBoards(&problem) || !createBlockAndLauncher(&problem)) {
    fail(problem, true);
    return;
  }
  publishBlock(ownPage(), block_->published());
  blocks_.assign(exchange_.records.size(), PublishedBlock{});
  blocks_[static_cast<std::size_t>(rank())] = block_->published();
  stage_ = Stage::AwaitingBlocks;
}

// Every peer's block, once published; a peer that failed says so in its report instead.
bool SetUp::collectBlocks() {
  for (std::size_t p = 0; p < blocks_.size(); ++p) {
    if (static_cast<int>(p) == rank()) continue;
    const BoardPage& page = peerBoards_[p]->page();
    if (const std::optional<LinkReport> report = publishedReport(page); report && report->mapped == 0) {
      concludeIneligible(refusal(fmt::format("rank {}: {}", p, fieldText(report->problem)), true));
      return false;
    }
    const std::optional<PublishedBlock> block = publishedBlock(page);
    if (!block) return false;
    blocks_[p] = *block;
  }
  return true;
}

// Maps every peer's block, measures the links, and publishes what we found.
void SetUp::mapAndReport() {
  Communicator& state = *exchange_.comm;
  report_.magic = kHandshakeMagic;
  std::string problem;
  if (!block_->mapPeers(peerLocations(exchange_.records, rank()), blocks_, std::move(peerBoards_), rank(), &bases_,
                        &problem)) {
    peerBoards_.clear();
    if (rank() != 0) rankZeroPage_ = nullptr;  // it went with the peers' boards; our failed report tells them
    fail(fmt::format("could not map its peers' buffers: {}", problem), true);
    return;
  }
  report_.mapped = 1;
  DeviceGuard guard(state.device());
  measureLinks(state.device(), rank(), exchange_.records, &report_);
  publishReport(ownPage(), report_);
  reportPublished_ = true;
  reports_.assign(exchange_.records.size(), LinkReport{});
  stage_ = Stage::AwaitingReports;
}

// Every rank's report, once published: judged alike on every rank.
void SetUp::collectReports() {
  const std::vector<BoardPage*> pages = block_->boardPages(rank());
  for (std::size_t p = 0; p < pages.size(); ++p) {
    const std::optional<LinkReport> report = publishedReport(*pages[p]);
    if (!report) return;
    if (report->mapped == 0) {  // said at once, without waiting for the others
      concludeIneligible(refusal(fmt::format("rank {}: {}", p, fieldText(report->problem)), true));
      return;
    }
    reports_[p] = *report;
  }
  if (faultFires(Fault::GiveUpBeforeAgreement, rank())) {
    fail("NCCL_CAR_TEST_FAULT give-up-before-agreement: gave its set-up up before the ranks agreed", true);
    return;
  }
  // The PCIe case that nothing measured lets go here, before the agreement: every call of
  // it would go to NCCL.
  const Verdict verdict = judgeTuning(judgeLinks(exchange_.records, reports_), exchange_.records,
                                      setupConfig(comm()->device()).table.get());
  if (verdict.eligible) concludeAgreeing(verdict);
  else concludeIneligible(verdict);
}

void SetUp::followAgreement(double now) {
  Communicator& comm = *exchange_.comm;
  Holdings letGo;
  bool agreeing = false;
  {
    Communicator::Locked locked = comm.lock();
    if (locked.phase() == CommPhase::Agreeing) {
      const bool late = now > deadline_;
      const std::string why = fmt::format("the ranks did not agree on a first call within NCCL_CAR_SETUP_TIMEOUT_MS "
                                          "({} ms)", shimConfig().setupTimeoutMs);
      locked.followAgreement(late, why, &letGo);
      if (late && locked.phase() == CommPhase::Ineligible) {
        CAR_WARN(comm.device(), "{}: {}; all-reduces go to NCCL", describe(comm), why);
      }
    }
    agreeing = locked.phase() == CommPhase::Agreeing;
  }
  letGoOf(std::move(letGo));
  if (!agreeing) settle();
}

bool SetUp::advance(HandshakeDevice& device, double now) {
  if (settled()) return true;
  Communicator& comm = *exchange_.comm;
  const CommPhase phase = comm.phase();
  if (stage_ == Stage::Agreeing && phase != CommPhase::Agreeing) {  // agreed, or let go of everything
    settle();
    return true;
  }
  if (stage_ != Stage::Agreeing && phase != CommPhase::SettingUp) {  // released meanwhile
    tellPeers("its communicator was released during set-up");
    letGoOf(takeOwn());
    CAR_INFO(comm.device(), "{} released during set-up", describe(comm));
    settle();
    return true;
  }
  if (stage_ != Stage::Agreeing && comm.stopRequested()) {
    // What failed first is what the log says; else the stop itself.
    const bool failedFirst = !exchange_.failure.empty() && exchange_.failure != kStoppedDuringSetup;
    fail(failedFirst ? exchange_.failure
                     : "stopped during set-up (ncclCommAbort, ncclCommRevoke or ncclCommShrink with NCCL_SHRINK_ABORT)",
         failedFirst);
    return true;
  }
  if (stage_ == Stage::Exchanging) {
    switch (pollExchange(device, exchange_)) {
      case ExchangeProgress::Pending:
        if (now > deadline_) giveUp("the exchange of records (some rank has not made it)");
        return settled();
      case ExchangeProgress::Failed:
        fail(exchange_.failure, exchange_.failure != kStoppedDuringSetup);
        return true;
      case ExchangeProgress::Done: afterRecords(); break;
    }
  }
  if (stage_ == Stage::AwaitingBlocks) {
    if (faultFires(Fault::AdvanceThrow, rank())) {
      throw std::runtime_error("NCCL_CAR_TEST_FAULT advance-throw, after this rank published its block");
    }
    if (!collectBlocks()) {
      if (!settled() && now > deadline_) giveUp("the peers' buffers");
      return settled();
    }
    mapAndReport();
  }
  if (stage_ == Stage::AwaitingReports) {
    collectReports();
    if (stage_ == Stage::AwaitingReports) {
      if (now > deadline_) giveUp("the peers' link reports");
      return settled();
    }
  }
  if (stage_ == Stage::Agreeing) followAgreement(now);
  return settled();
}

void SetUp::abandonAfterError(const char* what) noexcept {
  try {
    Communicator& comm = *exchange_.comm;
    CAR_WARN(comm.device(), "{}: set-up worker: internal error ({}); the set-up is abandoned and its calls go to NCCL",
             describe(comm), what);
    warned_ = true;
    if (stage_ == Stage::Agreeing) {
      Holdings letGo;
      comm.lock().followAgreement(true, std::string("internal error in its set-up: ") + what, &letGo);
      letGoOf(std::move(letGo));
      settle();
      return;
    }
    fail(std::string("internal error in its set-up: ") + what, true);
  } catch (...) {
    // Nothing more can be trusted to run: whatever is held stays held (never freed under a
    // peer), and the communicator forwards every call.
    try {
      exchange_.comm->lock().becomeIneligible(IneligibleCause::Verdict, "internal error in its set-up", nullptr);
    } catch (...) {
    }
    static_cast<void>(block_.release());
    settled_.store(true, std::memory_order_release);
  }
}

// ---- Endings.

void SetUp::tellPeers(const std::string& problem) {
  // A report already published stays as it was (peers may be reading it); the agreement then
  // tells them. Before this rank joined the agreement no decision can exist.
  if (ownPage_ != nullptr && !reportPublished_) {
    LinkReport failed{};
    failed.magic = kHandshakeMagic;
    copyText(failed.problem, sizeof(failed.problem), problem);
    publishReport(*ownPage_, failed);
    reportPublished_ = true;
  }
  if (rankZeroPage_ != nullptr) CallSwitch::refuse(*rankZeroPage_);
}

void SetUp::fail(const std::string& reason, bool unexpected, const std::string& forPeers) {
  tellPeers(forPeers.empty() ? reason : forPeers);
  concludeIneligible(refusal(reason, unexpected));
}

void SetUp::giveUp(const char* waitingFor) {
  Communicator& comm = *exchange_.comm;
  const std::string reason = fmt::format("the set-up did not complete within NCCL_CAR_SETUP_TIMEOUT_MS ({} ms), "
                                         "waiting for {}", shimConfig().setupTimeoutMs, waitingFor);
  CAR_WARN(comm.device(), "{}: {}; all-reduces go to NCCL", describe(comm), reason);
  warned_ = true;
  // The peers' copy fits a report's text.
  fail(reason, true, fmt::format("gave up its set-up after {} ms", shimConfig().setupTimeoutMs));
}

void SetUp::concludeIneligible(const Verdict& verdict) {
  Communicator& comm = *exchange_.comm;
  Holdings letGo = takeOwn();
  {
    Communicator::Locked locked = comm.lock();
    if (locked.phase() == CommPhase::Released) {
      CAR_INFO(comm.device(), "{} released during set-up", describe(comm));
    } else {
      warnVerdict(comm, verdict, warned_);
      Holdings held;
      locked.becomeIneligible(IneligibleCause::Verdict, verdict.reason, &held, verdict.forwardAs);
      letGo = together(std::move(letGo), std::move(held));
    }
  }
  letGoOf(std::move(letGo));
  settle();
}

void SetUp::concludeAgreeing(const Verdict& verdict) {
  Communicator& comm = *exchange_.comm;
  Holdings letGo;
  bool agreeing = false;
  {
    Communicator::Locked locked = comm.lock();
    if (locked.phase() != CommPhase::SettingUp) {
      tellPeers("its communicator was released during set-up");
      letGo = takeOwn();
      if (locked.phase() == CommPhase::Released) CAR_INFO(comm.device(), "{} released during set-up", describe(comm));
    } else {
      auto agreement = std::make_unique<CallSwitch>(block_->boardPages(rank()), rank());
      // The block (and its boards, which the agreement reads) is the communicator's from here on.
      ownPage_ = nullptr;
      rankZeroPage_ = nullptr;
      if (!locked.beginAgreeing(&block_, bases_, verdict, std::move(agreement), &letGo)) {
        letGo = together(takeOwn(), std::move(letGo));
      }
      stage_ = Stage::Agreeing;
      agreeing = locked.phase() == CommPhase::Agreeing;
    }
  }
  letGoOf(std::move(letGo));
  if (!agreeing) settle();
}

void SetUp::letGoOf(Holdings held) {
  if (held.block && faultFires(Fault::SlowRetire, rank())) {
    std::this_thread::sleep_for(std::chrono::duration<double>(kSlowRetireSeconds));
  }
  dispose(std::move(held), describe(*comm()), ImporterWait::None);
}

Holdings SetUp::takeOwn() {
  ownPage_ = nullptr;
  rankZeroPage_ = nullptr;
  Holdings own;
  own.block = std::move(block_);  // with the peers' boards once mapped
  peerBoards_.clear();
  board_.reset();
  memory_.reset();
  return own;
}

void SetUp::settle() {
  if (settled()) return;
  stage_ = Stage::Settled;
  // The exchange's stream and scratch: kept for good while an all-gather may still write the
  // scratch or still be launched on the stream.
  if (exchange_.stream != nullptr && !exchange_.deviceBusy) {
    DeviceGuard guard(exchange_.comm->device());
    if (exchange_.scratch != nullptr) returnScratch(exchange_.comm->device(), exchange_.scratch);
    // Returns at once; CUDA frees the stream when its work is done.
    CAR_CUDA_RELEASE(exchange_.comm->device(), cudaStreamDestroy(exchange_.stream));
  }
  exchange_.stream = nullptr;
  exchange_.scratch = nullptr;
  settled_.store(true, std::memory_order_release);
}

}  // namespace car
