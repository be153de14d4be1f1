// What a set-up passes through the boards (shim/handshake/setup_board.h): published items,
// and the agreement on the first call taken, raced between threads and between processes
// (real System V boards): every rank learns the same first call, and no rank has forwarded
// it or any call after it.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "handshake/setup_board.h"
#include "ipc/release_board.h"

using namespace car;

namespace {

struct Pages {
  std::vector<std::unique_ptr<BoardPage>> owned;
  explicit Pages(int ranks) {
    for (int r = 0; r < ranks; ++r) owned.push_back(std::make_unique<BoardPage>());
  }
  std::vector<BoardPage*> all() const {
    std::vector<BoardPage*> pages;
    for (const auto& page : owned) pages.push_back(page.get());
    return pages;
  }
};

// One rank's run: forwards calls until it learns the first call taken. It becomes ready at
// call `readyAt`, then makes calls until it knows. Returns the first call taken (or -1 for
// "never") and the last call it forwarded after becoming ready is below it.
struct RankRun {
  long long firstTaken = -2;
  long long lastForwarded = -1;
};

RankRun runRank(CallSwitch& agreement, std::uint64_t readyAt, std::uint64_t giveUpAt) {
  RankRun run;
  std::uint64_t call = 0;
  for (; call < readyAt; ++call) run.lastForwarded = static_cast<long long>(call);  // not ready: forwarded
  CallSwitch::Outcome outcome = agreement.joinReady(call);
  while (outcome.state == CallSwitch::State::Undecided) {
    if (call == giveUpAt) {
      outcome = agreement.giveUp();
      if (outcome.state != CallSwitch::State::Undecided) break;
    }
    outcome = agreement.beforeCall(call);
    if (outcome.state == CallSwitch::State::Undecided) {
      run.lastForwarded = static_cast<long long>(call);
      ++call;
      if (call % 7 == 0) std::this_thread::yield();
    }
  }
  if (outcome.state == CallSwitch::State::Decided) {
    // Calls below the first taken are forwarded too, then it takes its calls.
    run.firstTaken = static_cast<long long>(outcome.firstTaken);
  } else {
    run.firstTaken = -1;
  }
  return run;
}

}  // namespace

TEST_CASE("setup board: a block and a report are seen only once published", "[setup-board]") {
  BoardPage page{};
  CHECK_FALSE(publishedBlock(page));
  CHECK_FALSE(publishedReport(page));
  PublishedBlock block;
  block.address = 0x7f0000001000;
  block.handle.reserved[3] = 42;
  publishBlock(page, block);
  REQUIRE(publishedBlock(page));
  CHECK(publishedBlock(page)->address == block.address);
  CHECK(publishedBlock(page)->handle.reserved[3] == 42);
  LinkReport report{};
  report.magic = kHandshakeMagic;
  report.mapped = 1;
  report.p2pMask = 0x3;
  publishReport(page, report);
  REQUIRE(publishedReport(page));
  CHECK(publishedReport(page)->p2pMask == 0x3);
}

TEST_CASE("setup board: ranks ready at once agree on the first call", "[setup-board]") {
  Pages pages(3);
  CallSwitch rank0(pages.all(), 0), rank1(pages.all(), 1), rank2(pages.all(), 2);
  CHECK(rank0.joinReady(0).state == CallSwitch::State::Undecided);
  CHECK(rank1.joinReady(0).state == CallSwitch::State::Undecided);
  CHECK_FALSE(rank0.everyRankReady());
  const CallSwitch::Outcome last = rank2.joinReady(0);  // the last one ready decides
  REQUIRE(last.state == CallSwitch::State::Decided);
  CHECK(last.firstTaken == 0);
  CHECK(rank0.poll().state == CallSwitch::State::Decided);
  CHECK(rank1.beforeCall(0).firstTaken == 0);
}

TEST_CASE("setup board: a rank that forwarded more calls moves the first call taken past them", "[setup-board]") {
  Pages pages(2);
  CallSwitch rank0(pages.all(), 0), rank1(pages.all(), 1);
  CHECK(rank0.joinReady(5).state == CallSwitch::State::Undecided);
  // Rank 0 forwards calls 5 and 6 while rank 1 is not ready.
  CHECK(rank0.beforeCall(5).state == CallSwitch::State::Undecided);
  CHECK(rank0.beforeCall(6).state == CallSwitch::State::Undecided);
  const CallSwitch::Outcome decided = rank1.joinReady(2);
  REQUIRE(decided.state == CallSwitch::State::Decided);
  CHECK(decided.firstTaken == 7);
  CHECK(rank0.beforeCall(7).firstTaken == 7);
}

TEST_CASE("setup board: a rank that gives up makes every rank forward", "[setup-board]") {
  Pages pages(3);
  CallSwitch rank0(pages.all(), 0), rank1(pages.all(), 1), rank2(pages.all(), 2);
  rank0.joinReady(0);
  rank1.joinReady(0);
  CHECK(rank1.giveUp().state == CallSwitch::State::Never);
  CHECK(rank2.joinReady(0).state == CallSwitch::State::Never);
  CHECK(rank0.beforeCall(1).state == CallSwitch::State::Never);

  // A rank that failed before it was ready refuses for all.
  Pages other(2);
  CallSwitch first(other.all(), 0), second(other.all(), 1);
  first.joinReady(0);
  CallSwitch::refuse(*other.owned[0]);
  CHECK(second.joinReady(0).state == CallSwitch::State::Never);
  CHECK(first.poll().state == CallSwitch::State::Never);
}

TEST_CASE("setup board: giving up after the decision follows the decision", "[setup-board]") {
  Pages pages(2);
  CallSwitch rank0(pages.all(), 0), rank1(pages.all(), 1);
  rank0.joinReady(3);
  REQUIRE(rank1.joinReady(1).state == CallSwitch::State::Decided);
  const CallSwitch::Outcome outcome = rank0.giveUp();
  CHECK(outcome.state == CallSwitch::State::Decided);
  CHECK(outcome.firstTaken == 3);
}

TEST_CASE("setup board: a decider that died mid-decision leaves 'never' after a bounded wait", "[setup-board]") {
  Pages pages(2);
  CallSwitch rank0(pages.all(), 0), rank1(pages.all(), 1);
  rank0.joinReady(0);
  pages.owned[0]->firstTaken.store(1);  // "being decided", by a rank that never finishes
  const auto start = std::chrono::steady_clock::now();
  CHECK(rank1.joinReady(0).state == CallSwitch::State::Never);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(waited >= CallSwitch::kDecidingSeconds * 0.9);
  CHECK(waited < CallSwitch::kDecidingSeconds + 2);
}

// The hook between a rank's slot store and its look at the word again (CallSwitchHooks):
// another rank joins there and decides. The decider must count the call whose slot was just
// raised, and the rank that raised it must learn the decision at its look, not forward past it.
TEST_CASE("setup board: a rank that decides between another's slot store and its look again counts that call",
          "[setup-board]") {
  for (const int ranks : {2, 3}) {
    INFO(ranks << " ranks");
    Pages pages(ranks);
    std::vector<std::unique_ptr<CallSwitch>> agreements;
    for (int r = 0; r < ranks; ++r) agreements.push_back(std::make_unique<CallSwitch>(pages.all(), r));
    // Every rank but the last is ready; rank 0 forwards calls 3 and 4 meanwhile.
    for (int r = 0; r + 1 < ranks; ++r) REQUIRE(agreements[r]->joinReady(3).state == CallSwitch::State::Undecided);
    CHECK(agreements[0]->beforeCall(3).state == CallSwitch::State::Undecided);
    CHECK(agreements[0]->beforeCall(4).state == CallSwitch::State::Undecided);
    CallSwitch::Outcome decidedInBetween;
    int hookRuns = 0;
    CallSwitchHooks hooks;
    hooks.afterSlotStore = [&](int rank, std::uint64_t calls) {
      if (rank != 0 || calls != 6) return;  // rank 0's slot now covers its call 5
      ++hookRuns;
      decidedInBetween = agreements[static_cast<std::size_t>(ranks - 1)]->joinReady(2);  // the last rank decides
    };
    agreements[0]->setTestHooks(&hooks);
    const CallSwitch::Outcome atFive = agreements[0]->beforeCall(5);
    agreements[0]->setTestHooks(nullptr);
    REQUIRE(hookRuns == 1);
    REQUIRE(decidedInBetween.state == CallSwitch::State::Decided);
    CHECK(decidedInBetween.firstTaken == 6);  // past rank 0's call 5, whose slot it read
    REQUIRE(atFive.state == CallSwitch::State::Decided);
    CHECK(atFive.firstTaken == decidedInBetween.firstTaken);  // so rank 0 forwards call 5, as every rank does
    for (int r = 1; r + 1 < ranks; ++r) CHECK(agreements[r]->poll().firstTaken == 6);
  }
}

// A decider that is alive but slow between its "deciding" mark and its value (the hook holds
// it there): the others wait kDecidingSeconds for it, then write "never". The decider must
// find "never" when it comes back and follow it, so that every rank ends alike.
TEST_CASE("setup board: a slow decider finds 'never' written meanwhile and follows it", "[setup-board]") {
  constexpr int kRanks = 3;
  Pages pages(kRanks);
  CallSwitch rank0(pages.all(), 0), rank1(pages.all(), 1), rank2(pages.all(), 2);
  REQUIRE(rank0.joinReady(0).state == CallSwitch::State::Undecided);
  REQUIRE(rank2.joinReady(0).state == CallSwitch::State::Undecided);
  CallSwitch::Outcome waiter;
  double waited = 0;
  int hookRuns = 0;
  CallSwitchHooks hooks;
  hooks.afterDecidingMark = [&](int rank) {
    if (rank != 1) return;
    ++hookRuns;
    // The decider is held here while rank 0, at its next call, finds "deciding", waits for the
    // value, and gives up on it. Joined before the decider goes on: no sleep decides the order.
    std::thread other([&] {
      const auto start = std::chrono::steady_clock::now();
      waiter = rank0.beforeCall(0);
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
    other.join();
  };
  rank1.setTestHooks(&hooks);
  const CallSwitch::Outcome decider = rank1.joinReady(0);  // the last one ready decides
  rank1.setTestHooks(nullptr);
  REQUIRE(hookRuns == 1);
  CHECK(waiter.state == CallSwitch::State::Never);
  CHECK(waited >= CallSwitch::kDecidingSeconds * 0.9);
  CHECK(decider.state == CallSwitch::State::Never);  // not its own value: the others follow "never"
  CHECK(rank2.poll().state == CallSwitch::State::Never);
  CHECK(rank0.poll().state == CallSwitch::State::Never);
  CHECK(rank1.giveUp().state == CallSwitch::State::Never);
}

TEST_CASE("setup board: threads racing to decide agree, and none forwarded the first call taken", "[setup-board]") {
  std::mt19937 random(7);
  for (int round = 0; round < 300; ++round) {
    const int ranks = 2 + static_cast<int>(random() % 7);
    Pages pages(ranks);
    std::vector<std::unique_ptr<CallSwitch>> agreements;
    std::vector<std::uint64_t> readyAt;
    for (int r = 0; r < ranks; ++r) {
      agreements.push_back(std::make_unique<CallSwitch>(pages.all(), r));
      readyAt.push_back(random() % 50);
    }
    // Now and then a rank gives up (its time ran out) while the others run.
    const int quitter = round % 5 == 0 ? static_cast<int>(random() % ranks) : -1;
    std::vector<RankRun> runs(ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      const std::uint64_t giveUpAt = r == quitter ? readyAt[r] + random() % 20 : UINT64_MAX;
      threads.emplace_back([&, r, giveUpAt] { runs[r] = runRank(*agreements[r], readyAt[r], giveUpAt); });
    }
    for (std::thread& thread : threads) thread.join();
    INFO("round " << round << " ranks " << ranks << " quitter " << quitter);
    for (int r = 0; r < ranks; ++r) {
      CHECK(runs[r].firstTaken == runs[0].firstTaken);
      if (runs[r].firstTaken >= 0) CHECK(runs[r].lastForwarded < runs[r].firstTaken);
    }
    if (quitter < 0) CHECK(runs[0].firstTaken >= 0);
  }
}

TEST_CASE("setup board: processes agree through System V boards", "[setup-board]") {
  constexpr int kRanks = 4;
  std::string problem;
  std::vector<std::unique_ptr<SysvReleaseBoard>> boards;
  std::vector<std::pair<int, std::uint64_t>> ids;  // read here: the pages are not mapped in a fork()ed child
  for (int r = 0; r < kRanks; ++r) {
    boards.push_back(SysvReleaseBoard::create(&problem));
    REQUIRE(boards.back());
    ids.emplace_back(boards.back()->id(), boards.back()->token());
  }
  int pipes[kRanks][2];
  std::vector<pid_t> children;
  for (int r = 0; r < kRanks; ++r) {
    REQUIRE(pipe(pipes[r]) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Each process attaches every board by id and token, as a rank does after the exchange.
      std::vector<std::unique_ptr<SysvReleaseBoard>> attached;
      std::vector<BoardPage*> pages;
      for (int p = 0; p < kRanks; ++p) {
        std::string why;
        attached.push_back(SysvReleaseBoard::attach(ids[p].first, ids[p].second, &why));
        if (!attached.back()) _exit(3);
        pages.push_back(&attached.back()->page());
      }
      CallSwitch agreement(pages, r);
      const RankRun run = runRank(agreement, static_cast<std::uint64_t>(r * 3), UINT64_MAX);
      const long long result[2] = {run.firstTaken, run.lastForwarded};
      if (write(pipes[r][1], result, sizeof(result)) != sizeof(result)) _exit(4);
      _exit(0);
    }
    close(pipes[r][1]);
    children.push_back(child);
  }
  long long firstTaken = -2;
  for (int r = 0; r < kRanks; ++r) {
    long long result[2] = {-3, -3};
    CHECK(read(pipes[r][0], result, sizeof(result)) == static_cast<ssize_t>(sizeof(result)));
    close(pipes[r][0]);
    int status = 0;
    waitpid(children[static_cast<std::size_t>(r)], &status, 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    if (r == 0) firstTaken = result[0];
    CHECK(result[0] == firstTaken);
    CHECK(result[1] < result[0]);
  }
  CHECK(firstTaken >= 9);  // rank 3 forwarded calls 0..8 before it was ready
}
