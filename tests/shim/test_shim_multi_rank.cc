// Ranks that are threads of one process, over the stand-in's exchange (STANDIN_NCCL_EXCHANGE=1)
// with libnccl-car.so built over the fake CUDA runtime (tests/fake_cuda/): every multi-rank
// communicator is set up for real, found eligible, and takes its all-reduces on our engine
// but the ones too large; ThreadSanitizer runs the same driver (tests/tsan/run-tsan.sh).
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "call_checks.h"

using namespace shimtest;

namespace {

struct Asked {
  std::string rank, comm;
  int allReduces = 0, above8MiB = 0;
};

// The driver's "rank R comm 0x.. all-reduces=N above-8MiB=M" lines.
std::vector<Asked> askedOf(const std::string& out) {
  std::vector<Asked> asked;
  const std::regex pattern("^rank (\\d+) comm (0x[0-9a-f]+) all-reduces=(\\d+) above-8MiB=(\\d+)$");
  for (const std::string& line : splitLines(out)) {
    std::smatch match;
    if (!std::regex_match(line, match, pattern)) continue;
    asked.push_back(Asked{match[1], match[2], std::stoi(match[3]), std::stoi(match[4])});
  }
  return asked;
}

// "taken 1shot=a 2shot=b ... (n bytes) forwarded f (reasons)": the sum of the taken counts.
int takenIn(const std::string& released) {
  const std::size_t end = released.find(" (");
  std::istringstream words(released.substr(0, end));
  std::string word;
  int taken = 0;
  while (words >> word) {
    const std::size_t equals = word.find('=');
    if (equals != std::string::npos) taken += std::stoi(word.substr(equals + 1));
  }
  return taken;
}

// "... forwarded F (reason=n reason=n)": F, and n by reason.
int forwardedIn(const std::string& released, std::map<std::string, int>* byReason) {
  static const std::regex pattern(" forwarded (\\d+)(?: \\(([^)]*)\\))?$");
  std::smatch match;
  if (!std::regex_search(released, match, pattern)) return -1;
  std::istringstream words(match[2].str());
  std::string word;
  while (words >> word) {
    const std::size_t equals = word.find('=');
    (*byReason)[word.substr(0, equals)] += std::stoi(word.substr(equals + 1));
  }
  return std::stoi(match[1]);
}

struct Ranks {
  int ranks, calls, communicators;
  bool nonblocking = false;
  bool oppositeOrder = false;  // NCCL_COMM_BLOCKING=0 too
};

ChildResult runRanks(const Ranks& shape) {
  ChildRun run;
  run.program = CAR_MULTI_RANK_DRIVER;
  run.args = {std::to_string(shape.ranks), std::to_string(shape.calls), std::to_string(shape.communicators)};
  if (shape.oppositeOrder) run.args.push_back("opposite-order");
  run.preload = false;
  run.env = {std::string("LD_PRELOAD=") + CAR_FAKE_CUDA_SHIM_LIBRARY, "STANDIN_NCCL_EXCHANGE=1", "NCCL_CAR_DEBUG=INFO"};
  if (shape.nonblocking || shape.oppositeOrder) run.env.push_back("NCCL_COMM_BLOCKING=0");
  // A rank that waits for an exchange its peer never starts gives up after this (not the
  // stand-in's long default: the wait is the failure this case shows).
  if (shape.oppositeOrder) run.env.push_back("STANDIN_NCCL_EXCHANGE_TIMEOUT_MS=1500");
  run.timeoutSeconds = 300;
  return runChild(run);
}

void checkRanks(const Ranks& shape) {
  std::set<std::string> allowedReasons = {"too-large"};
  if (shape.nonblocking || shape.oppositeOrder) allowedReasons.insert({"comm-not-ready", "nonblocking-group"});
  const ChildResult run = runRanks(shape);
  INFO(run.out << run.err.substr(0, 6000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  CHECK(linesWith(run.out, {"multi-rank failures=0"}).size() == 1);
  CHECK(carLines(run.err, "WARN").empty());

  const std::vector<Asked> asked = askedOf(run.out);
  REQUIRE(asked.size() == static_cast<std::size_t>(shape.ranks * shape.communicators));
  for (const Asked& one : asked) {
    INFO("rank " << one.rank << " comm " << one.comm);
    REQUIRE(one.above8MiB > 0);
    REQUIRE(one.allReduces > one.above8MiB);
    const std::vector<std::string> setup = infoAbout(run.err, one.comm, "setup:");
    REQUIRE(setup.size() == 1);
    CHECK(setup[0].rfind("eligible (", 0) == 0);
    // Every call ran on our engine or went to NCCL as too large (every one past 8 MiB, and
    // whatever the policy's own limits for a type turn away); a nonblocking communicator's
    // calls also while it is set up and inside groups (docs/design.md, "When set-up happens").
    const std::vector<std::string> released = infoAbout(run.err, one.comm, "released:");
    REQUIRE(released.size() == 1);
    std::map<std::string, int> byReason;
    const int forwarded = forwardedIn(released[0], &byReason);
    REQUIRE(forwarded >= 0);
    int counted = 0;
    for (const auto& [reason, count] : byReason) {
      INFO("forwarded as " << reason);
      CHECK(allowedReasons.count(reason) == 1);
      counted += count;
    }
    CHECK(counted == forwarded);
    CHECK(byReason["too-large"] >= one.above8MiB);
    CHECK(takenIn(released[0]) == one.allReduces - forwarded);
    CHECK(takenIn(released[0]) > 0);
  }
}

}  // namespace

TEST_CASE("multi-rank: ranks as threads set up, take every call up to the limit, and release", "[shim][multi-rank]") {
  SECTION("2 ranks, one communicator") { checkRanks({2, 200, 1}); }
  SECTION("8 ranks, two communicators set up in one group and used at once") { checkRanks({8, 100, 2}); }
  SECTION("4 ranks, two nonblocking communicators, each set up at its first all-reduce") {
    checkRanks({4, 100, 2, true});
  }
}

// Issue 24 item 3, not fixed: a nonblocking communicator's set-up waits inside its first
// all-reduce for every peer's exchange, so when the ranks' first all-reduces come in opposite
// orders each waits for a peer waiting on the other communicator (with NCCL, forever; here
// until the stand-in gives up, and the set-ups fail with a WARN). What must hold once it is
// fixed is asserted; [!shouldfail] reports it if it starts to pass.
TEST_CASE("multi-rank: nonblocking communicators first used in opposite orders are set up and taken",
          "[shim][multi-rank][!shouldfail]") {
  checkRanks({2, 40, 2, false, true});
}
