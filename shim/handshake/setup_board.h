// What a set-up passes between the ranks after its one exchange through NCCL: through the
// ranks' board pages (shim/ipc/board_page.h), read without waiting, so no thread of ours ever
// waits for a peer in a call of the program (docs/design.md, "The set-up").
//
//  - Each rank publishes its block (address, IPC handle), then its link report, in its own
//    page; a rank whose set-up fails publishes a report saying why instead, so that its peers
//    stop waiting for it.
//  - CallSwitch: the ranks agree on the first call of the communicator that our kernels may
//    take. Each rank forwards every call until it knows that index; no rank may have
//    forwarded a call at or after it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "handshake/handshake_record.h"
#include "ipc/board_page.h"

namespace car {

void publishBlock(BoardPage& own, const PublishedBlock& block);
std::optional<PublishedBlock> publishedBlock(const BoardPage& page);
void publishReport(BoardPage& own, const LinkReport& report);
std::optional<LinkReport> publishedReport(const BoardPage& page);

// The agreement on the first call taken, over rank 0's page (the decision) and every rank's
// (its slot). Slot: kSlotReady | n once the rank is set up, n being the number of its calls
// it may have forwarded; it rises before each call forwarded while undecided. The decision
// is max(n) over all ranks, made by the first rank that finds every slot ready: it marks
// rank 0's word "deciding" before reading the slots, and a rank that raised its slot before
// that mark is read by the decider, while one that sees the mark waits for the value (a few
// loads), so no rank has forwarded the call decided. A rank that gives up before the decision
// writes "never" instead, which every rank then follows: nothing is taken.
//
// Sequentially consistent atomics in shared memory: correct between threads and processes.
// A rank that dies while deciding leaves "deciding" for good: the others wait for it at
// most kDecidingSeconds, then write "never".
// Test hooks (tests/cpu/test_setup_board.cc): each, when set, runs at a point of the protocol
// whose interleaving with the other ranks matters, so that a test can force one there
// deterministically. Never set outside tests.
struct CallSwitchHooks {
  // joinReady, beforeCall: this rank's slot now says `calls` calls may have been forwarded
  // here; the decision word is not read again yet.
  std::function<void(int rank, std::uint64_t calls)> afterSlotStore;
  // This rank marked the decision word "deciding" and has read no slot yet: a decider that is
  // slow (descheduled, stopped in a debugger) but alive.
  std::function<void(int rank)> afterDecidingMark;
};

class CallSwitch {
 public:
  enum class State { Undecided, Decided, Never };
  struct Outcome {
    State state = State::Undecided;
    std::uint64_t firstTaken = 0;  // Decided: the first call index our kernels may take
  };

  static constexpr std::uint64_t kSlotReady = std::uint64_t{1} << 63;
  static constexpr double kDecidingSeconds = 1.0;

  // pages[r] is rank r's page (ours at `rank`), attached for as long as this lives.
  CallSwitch(std::vector<BoardPage*> pages, int rank);

  // This rank is set up, and `calls` calls of the communicator have been routed here (all
  // forwarded). Publishes the slot and decides if every rank is ready.
  Outcome joinReady(std::uint64_t calls);
  // Before call `call` (every earlier one forwarded): Decided means take it if call >=
  // firstTaken; Undecided means forward it (the slot now covers it); Never: forward all.
  Outcome beforeCall(std::uint64_t call);
  // Without a call: decides if every rank is ready, else says what is known.
  Outcome poll();
  // This rank will never take a call: "never", unless the decision was already made (which
  // it then returns: the caller must follow it).
  Outcome giveUp();
  // Without this rank joining (it failed before it was ready): "never" for every rank. A
  // decision cannot exist yet: it needs this rank's slot.
  static void refuse(BoardPage& rankZeroPage);

  bool everyRankReady() const;

  // Test only: `hooks` (outliving this) run at their points from now on; null: none.
  void setTestHooks(const CallSwitchHooks* hooks) { hooks_ = hooks; }

 private:
  Outcome settle(std::uint64_t word);
  std::uint64_t tryDecide();
  void storeSlot(std::uint64_t calls);

  std::vector<BoardPage*> pages_;
  int rank_;
  const CallSwitchHooks* hooks_ = nullptr;
};

}  // namespace car
