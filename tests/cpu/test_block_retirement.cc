// A block is freed only when no importer is left, and a release never waits long for one
// (shim/ipc/block_retirement.h). Fake boards and a fake clock: the policy alone.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>

#include "ipc/block_retirement.h"

using namespace car;

namespace {

class FakeClock final : public RetirementClock {
 public:
  double seconds() override { return now; }
  void pause() override {
    now += 0.001;
    if (onPause) onPause(now);
  }
  double now = 100.0;
  std::function<void(double)> onPause;
};

// Importers as a test scripts them; `retired` records the owner's call.
struct BoardState {
  int elsewhere = 0;
  int here = 0;
  bool retired = false;
};

class FakeBoard final : public ReleaseBoard {
 public:
  explicit FakeBoard(std::shared_ptr<BoardState> state) : state_(std::move(state)) {}
  void retire() override { state_->retired = true; }
  int importers() const override { return state_->elsewhere < 0 ? -1 : state_->elsewhere + state_->here; }
  int importersHere() const override { return state_->here; }

 private:
  std::shared_ptr<BoardState> state_;
};

struct Block {
  std::shared_ptr<BoardState> board = std::make_shared<BoardState>();
  std::shared_ptr<int> frees = std::make_shared<int>(0);
  RetiringBlock retiring() {
    RetiringBlock block;
    block.board = std::make_unique<FakeBoard>(board);
    block.free = [frees = frees] { ++*frees; };
    block.who = "comm 0x1 rank 0/2";
    return block;
  }
};

}  // namespace

TEST_CASE("retirement: a block nobody imports any more is freed at once", "[retirement]") {
  FakeClock clock;
  BlockRetirement retirement(clock, 2.0);
  Block block;
  retirement.retire(block.retiring());
  CHECK(block.board->retired);
  CHECK(*block.frees == 1);
  CHECK(clock.now == 100.0);  // no wait
  CHECK(retirement.kept() == 0);
}

TEST_CASE("retirement: a peer process that lets go within the wait gets the block freed then", "[retirement]") {
  FakeClock clock;
  BlockRetirement retirement(clock, 2.0);
  Block block;
  block.board->elsewhere = 1;
  clock.onPause = [&](double now) {
    if (now >= 100.5) block.board->elsewhere = 0;  // the peer closes its mapping after 0.5 s
    CHECK(*block.frees == 0);                      // never freed while it still maps it
  };
  retirement.retire(block.retiring());
  CHECK(*block.frees == 1);
  CHECK(clock.now == Approx(100.5).margin(0.002));
}

TEST_CASE("retirement: a peer that does not let go in time keeps the block, freed at a later release",
          "[retirement]") {
  FakeClock clock;
  BlockRetirement retirement(clock, 2.0);
  Block slow;
  slow.board->elsewhere = 1;
  retirement.retire(slow.retiring());
  CHECK(*slow.frees == 0);
  CHECK(clock.now == Approx(102.0).margin(0.002));  // bounded
  CHECK(retirement.kept() == 1);

  retirement.sweep();  // still mapped: still kept
  CHECK(*slow.frees == 0);

  slow.board->elsewhere = 0;  // the peer finally released (or died)
  Block next;
  retirement.retire(next.retiring());  // any later release sweeps
  CHECK(*next.frees == 1);
  CHECK(*slow.frees == 1);
  CHECK(retirement.kept() == 0);
}

TEST_CASE("retirement: an importer in this process means no wait at all", "[retirement]") {
  // ncclCommInitAll / nccl-tests -g N: one thread destroys rank 0, then rank 1. Rank 1's
  // mapping of rank 0's block goes away only at rank 1's release, after this one returns.
  FakeClock clock;
  BlockRetirement retirement(clock, 2.0);
  Block rank0;
  rank0.board->here = 1;
  retirement.retire(rank0.retiring());
  CHECK(clock.now == 100.0);
  CHECK(*rank0.frees == 0);

  rank0.board->here = 0;  // rank 1's release closed its side of rank 0's block ...
  Block rank1;
  retirement.retire(rank1.retiring());  // ... and retiring its own block sweeps rank 0's
  CHECK(*rank0.frees == 1);
  CHECK(*rank1.frees == 1);
}

TEST_CASE("retirement: when the importers cannot be counted the block is kept", "[retirement]") {
  FakeClock clock;
  BlockRetirement retirement(clock, 2.0);
  Block unknown;
  unknown.board->elsewhere = -1;
  retirement.retire(unknown.retiring());
  CHECK(*unknown.frees == 0);
  CHECK(clock.now == 100.0);
  CHECK(retirement.kept() == 1);
}
