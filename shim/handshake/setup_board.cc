#include "handshake/setup_board.h"

#include <chrono>
#include <thread>

namespace car {
namespace {

// Rank 0's word: 0 undecided, 1 being decided, 2 never, else the first call taken + 3.
constexpr std::uint64_t kUndecided = 0;
constexpr std::uint64_t kDeciding = 1;
constexpr std::uint64_t kNever = 2;
constexpr std::uint64_t kFirstDecided = 3;

constexpr auto kSeqCst = std::memory_order_seq_cst;

}  // namespace

void publishBlock(BoardPage& own, const PublishedBlock& block) {
  own.blockAddress = block.address;
  own.handle = block.handle;
  own.blockPublished.store(1, std::memory_order_release);
}

std::optional<PublishedBlock> publishedBlock(const BoardPage& page) {
  if (page.blockPublished.load(std::memory_order_acquire) == 0) return std::nullopt;
  PublishedBlock block;
  block.address = page.blockAddress;
  block.handle = page.handle;
  return block;
}

void publishReport(BoardPage& own, const LinkReport& report) {
  own.report = report;
  own.reportPublished.store(1, std::memory_order_release);
}

std::optional<LinkReport> publishedReport(const BoardPage& page) {
  if (page.reportPublished.load(std::memory_order_acquire) == 0) return std::nullopt;
  return page.report;
}

CallSwitch::CallSwitch(std::vector<BoardPage*> pages, int rank) : pages_(std::move(pages)), rank_(rank) {}

bool CallSwitch::everyRankReady() const {
  for (const BoardPage* page : pages_) {
    if ((page->slot.load(kSeqCst) & kSlotReady) == 0) return false;
  }
  return true;
}

std::uint64_t CallSwitch::tryDecide() {
  std::atomic<std::uint64_t>& word = pages_[0]->firstTaken;
  if (!everyRankReady()) return word.load(kSeqCst);
  std::uint64_t expected = kUndecided;
  if (!word.compare_exchange_strong(expected, kDeciding, kSeqCst)) return expected;
  if (hooks_ != nullptr && hooks_->afterDecidingMark) hooks_->afterDecidingMark(rank_);
  // Every slot raised before the mark is seen here; a rank raising one after it sees the
  // mark and waits for the value.
  std::uint64_t first = 0;
  for (const BoardPage* page : pages_) {
    const std::uint64_t calls = page->slot.load(kSeqCst) & ~kSlotReady;
    if (calls > first) first = calls;
  }
  expected = kDeciding;
  const std::uint64_t decided = first + kFirstDecided;
  // A rank that waited too long for this value may have written "never" meanwhile.
  return word.compare_exchange_strong(expected, decided, kSeqCst) ? decided : expected;
}

CallSwitch::Outcome CallSwitch::settle(std::uint64_t word) {
  std::atomic<std::uint64_t>& shared = pages_[0]->firstTaken;
  if (word == kDeciding) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kDecidingSeconds);
    while ((word = shared.load(kSeqCst)) == kDeciding && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    // The decider is gone (or stalled past every reason): nobody takes anything.
    if (word == kDeciding && shared.compare_exchange_strong(word, kNever, kSeqCst)) word = kNever;
  }
  Outcome outcome;
  if (word == kNever) {
    outcome.state = State::Never;
  } else if (word >= kFirstDecided) {
    outcome.state = State::Decided;
    outcome.firstTaken = word - kFirstDecided;
  }
  return outcome;
}

void CallSwitch::storeSlot(std::uint64_t calls) {
  pages_[static_cast<std::size_t>(rank_)]->slot.store(kSlotReady | calls, kSeqCst);
  if (hooks_ != nullptr && hooks_->afterSlotStore) hooks_->afterSlotStore(rank_, calls);
}

CallSwitch::Outcome CallSwitch::joinReady(std::uint64_t calls) {
  storeSlot(calls);
  return settle(tryDecide());
}

CallSwitch::Outcome CallSwitch::beforeCall(std::uint64_t call) {
  std::uint64_t word = pages_[0]->firstTaken.load(kSeqCst);
  if (word == kUndecided) {
    // Raised before looking again: a decision made after this look counts this call.
    storeSlot(call + 1);
    word = tryDecide();
  }
  return settle(word);
}

CallSwitch::Outcome CallSwitch::poll() { return settle(tryDecide()); }

CallSwitch::Outcome CallSwitch::giveUp() {
  std::atomic<std::uint64_t>& shared = pages_[0]->firstTaken;
  std::uint64_t word = kUndecided;
  if (shared.compare_exchange_strong(word, kNever, kSeqCst)) word = kNever;
  return settle(word);
}

void CallSwitch::refuse(BoardPage& rankZeroPage) {
  std::uint64_t word = kUndecided;
  rankZeroPage.firstTaken.compare_exchange_strong(word, kNever, kSeqCst);
}

}  // namespace car
