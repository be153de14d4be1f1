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
  bool neverDestroyed = false;  // left alive at exit: counted there
};

ChildResult runDriver(int ranks, int calls, int communicators, const std::string& mode, bool nonblocking,
                      const std::vector<std::string>& env = {}) {
  ChildRun run;
  run.program = CAR_MULTI_RANK_DRIVER;
  run.args = {std::to_string(ranks), std::to_string(calls), std::to_string(communicators)};
  if (!mode.empty()) run.args.push_back(mode);
  run.preload = false;
  run.env = {std::string("LD_PRELOAD=") + CAR_FAKE_CUDA_SHIM_LIBRARY, "STANDIN_NCCL_EXCHANGE=1", "NCCL_CAR_DEBUG=INFO"};
  if (nonblocking) run.env.push_back("NCCL_COMM_BLOCKING=0");
  run.env.insert(run.env.end(), env.begin(), env.end());
  run.timeoutSeconds = 300;
  return runChild(run);
}

ChildResult runRanks(const Ranks& shape) {
  const std::string mode = shape.oppositeOrder ? "opposite-order" : shape.neverDestroyed ? "never-destroyed" : "";
  return runDriver(shape.ranks, shape.calls, shape.communicators, mode, shape.nonblocking || shape.oppositeOrder);
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
    const std::vector<std::string> released =
        infoAbout(run.err, one.comm, shape.neverDestroyed ? "alive at exit:" : "released:");
    REQUIRE(released.size() == 1);
    CHECK(infoAbout(run.err, one.comm, shape.neverDestroyed ? "released:" : "alive at exit:").empty());
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
    // A nonblocking communicator's calls past 8 MiB may go as grouped or not yet ready instead.
    const bool nonblocking = shape.nonblocking || shape.oppositeOrder;
    CHECK(byReason["too-large"] + (nonblocking ? byReason["nonblocking-group"] + byReason["comm-not-ready"] : 0) >=
          one.above8MiB);
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

TEST_CASE("multi-rank: communicators never destroyed, as JAX leaves its own, report their calls taken at exit",
          "[shim][multi-rank][exit]") {
  SECTION("2 ranks, one communicator") { checkRanks({2, 200, 1, false, false, true}); }
  SECTION("4 ranks, two communicators") { checkRanks({4, 100, 2, false, false, true}); }
}

// Two nonblocking communicators whose first all-reduces come in opposite orders on the ranks
// (NCCL asks for no order between communicators): no rank waits in its first all-reduce for
// a peer that is at the other communicator; both are set up in the background and take
// calls from an agreed one on.
TEST_CASE("multi-rank: nonblocking communicators first used in opposite orders are set up and taken",
          "[shim][multi-rank]") {
  checkRanks({2, 40, 2, false, true});
  checkRanks({4, 40, 2, false, true});
}

namespace {

// "rank R <what> took T s"
std::vector<double> secondsTaken(const std::string& out, const std::string& what) {
  std::vector<double> seconds;
  const std::regex pattern("^rank \\d+ " + what + " took ([0-9.]+) s$");
  for (const std::string& line : splitLines(out)) {
    std::smatch match;
    if (std::regex_match(line, match, pattern)) seconds.push_back(std::stod(match[1]));
  }
  return seconds;
}

// A rank that never takes part in our set-up (made past the library, then gone): every
// other rank gives up after NCCL_CAR_SETUP_TIMEOUT_MS with a WARN and forwards every call.
void checkPeerNeverJoins(bool nonblocking) {
  constexpr int kRanks = 3;
  constexpr double kTimeout = 1.5;
  const ChildResult run = runDriver(kRanks, 20, 1, "peer-never-joins", nonblocking, {"NCCL_CAR_SETUP_TIMEOUT_MS=1500"});
  INFO(run.out << run.err.substr(0, 6000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  const std::vector<double> inits = secondsTaken(run.out, "init");
  const std::vector<double> firsts = secondsTaken(run.out, "first all-reduce");
  REQUIRE(inits.size() == kRanks - 1);
  REQUIRE(firsts.size() == kRanks - 1);
  for (double seconds : inits) {
    // Blocking: the creating call waits for the set-up, bounded; nonblocking: not at all.
    if (nonblocking) CHECK(seconds < 1.0);
    else CHECK((seconds >= kTimeout * 0.9 && seconds < kTimeout + 10));
  }
  for (double seconds : firsts) CHECK(seconds < 1.0);  // never a wait for the peer
  const std::vector<std::string> warns = carLines(run.err, "WARN");
  CHECK(warns.size() == kRanks - 1);
  for (const std::string& warn : warns) {
    CHECK(warn.find("the set-up did not complete within NCCL_CAR_SETUP_TIMEOUT_MS (1500 ms), waiting for the "
                    "exchange of records") != std::string::npos);
  }
  for (const Asked& one : askedOf(run.out)) {
    INFO("rank " << one.rank << " comm " << one.comm);
    const std::vector<std::string> setup = infoAbout(run.err, one.comm, "setup:");
    REQUIRE(setup.size() == 1);
    CHECK(setup[0].rfind("not eligible: the set-up did not complete", 0) == 0);
    const std::vector<std::string> released = infoAbout(run.err, one.comm, "released:");
    REQUIRE(released.size() == 1);
    CHECK(takenIn(released[0]) == 0);
    std::map<std::string, int> byReason;
    CHECK(forwardedIn(released[0], &byReason) == one.allReduces);
  }
}

}  // namespace

TEST_CASE("multi-rank: a peer that never joins the set-up bounds the others' wait", "[shim][multi-rank]") {
  SECTION("blocking: the creating call returns after NCCL_CAR_SETUP_TIMEOUT_MS") { checkPeerNeverJoins(false); }
  SECTION("nonblocking: nothing waits; the set-up gives up in the background") { checkPeerNeverJoins(true); }
}

// Ending a communicator (abort, destroy) while its set-up waits in the background for a rank
// that never comes: the call returns at once, the set-up lets go of what it made, and no call
// of ours reaches NCCL on the communicator after it was ended.
TEST_CASE("multi-rank: a communicator ended while its set-up waits in the background", "[shim][multi-rank]") {
  constexpr int kRanks = 3;
  const ChildResult run = runDriver(kRanks, 10, 2, "end-in-setup", true);
  INFO(run.out << run.err.substr(0, 6000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  const std::vector<double> ends = secondsTaken(run.out, "end");
  REQUIRE(ends.size() == kRanks - 1);
  for (double seconds : ends) CHECK(seconds < 1.0);
  // Each communicator's set-up sees the release, or the stop an abort asks for first.
  CHECK(linesWith(run.err, {"NCCL-CAR INFO", "released during set-up"}).size() +
            linesWith(run.err, {"NCCL-CAR INFO", "setup: not eligible: stopped"}).size() ==
        2 * (kRanks - 1));
  CHECK(carLines(run.err, "WARN").empty());
  CHECK(linesWith(run.log, {" dead=1"}).empty());
}
