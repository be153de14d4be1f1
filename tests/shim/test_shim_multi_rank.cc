// Ranks that are threads of one process, over the stand-in's exchange (STANDIN_NCCL_EXCHANGE=1)
// with libnccl-car.so built over the fake CUDA runtime (tests/fake_cuda/): every multi-rank
// communicator is set up for real, found eligible, and takes its all-reduces on our engine
// but the ones too large; ThreadSanitizer runs the same driver (tests/tsan/run-tsan.sh).
//
// The ranks are checked against each other, not only one by one: a rank that takes a call
// another forwards waits for it forever on a GPU, where here nothing would wait. So every rank
// of a communicator must say the same "from call N", forward as many calls as not ready and
// take as many; the stand-in NCCL must see the same k-th collective from every rank
// ("standin: VIOLATION sequence"), and the fake runtime the same k-th kernel launch
// ("fake-cuda: VIOLATION launch-...").
//
// The test cases tagged [issue-44] each failed on the code before the control plane's rewrite,
// for the finding they name.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#include <filesystem>

#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "call_checks.h"

using namespace shimtest;

namespace {

struct Asked {
  std::string rank, comm;
  int index = 0, allReduces = 0, above8MiB = 0, refused = 0;
  double slowest = 0;
};

// The driver's "rank R comm 0x.. index C all-reduces=N above-8MiB=M refused=F slowest=T" lines.
std::vector<Asked> askedOf(const std::string& out) {
  std::vector<Asked> asked;
  const std::regex pattern("^rank (\\d+) comm (0x[0-9a-f]+) index (\\d+) all-reduces=(\\d+) above-8MiB=(\\d+) "
                           "refused=(\\d+) slowest=([0-9.]+)$");
  for (const std::string& line : splitLines(out)) {
    std::smatch match;
    if (!std::regex_match(line, match, pattern)) continue;
    Asked one;
    one.rank = match[1];
    one.comm = match[2];
    one.index = std::stoi(match[3]);
    one.allReduces = std::stoi(match[4]);
    one.above8MiB = std::stoi(match[5]);
    one.refused = std::stoi(match[6]);
    one.slowest = std::stod(match[7]);
    asked.push_back(one);
  }
  return asked;
}

// The "rank R comm ..." lines of a driver run that ended by itself with exit status 0, which
// must be `expected` (one per rank and communicator).
std::vector<Asked> askedOfCleanExit(const ChildResult& run, std::size_t expected) {
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  std::vector<Asked> asked = askedOf(run.out);
  REQUIRE(asked.size() == expected);
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

// "eligible (...; from call N)": N.
std::optional<long long> fromCall(const std::string& setup) {
  static const std::regex pattern("^eligible \\(.*; from call (\\d+)\\)$");
  std::smatch match;
  if (!std::regex_match(setup, match, pattern)) return std::nullopt;
  return std::stoll(match[1]);
}

// The stand-ins' reports of a broken rule, of one kind: "standin: VIOLATION sequence",
// "fake-cuda: VIOLATION launch-", ... (tests/shim/standin_nccl.h, tests/fake_cuda/).
std::vector<std::string> violations(const std::string& err, const std::string& tag) {
  std::vector<std::string> found;
  for (const std::string& line : splitLines(err)) {
    if (line.rfind(tag, 0) == 0) found.push_back(line);
  }
  return found;
}

ChildResult runDriver(int ranks, int calls, int communicators, const std::string& mode, bool nonblocking,
                      const std::vector<std::string>& env = {}) {
  ChildRun run;
  run.program = CAR_MULTI_RANK_DRIVER;
  run.args = {std::to_string(ranks), std::to_string(calls), std::to_string(communicators)};
  if (!mode.empty()) run.args.push_back(mode);
  run.preload = false;
  run.env = {std::string("LD_PRELOAD=") + CAR_FAKE_CUDA_SHIM_LIBRARY, "STANDIN_NCCL_EXCHANGE=1",
             "STANDIN_NCCL_ASYNC_JOBS=1", "NCCL_CAR_DEBUG=INFO"};
  if (nonblocking) run.env.push_back("NCCL_COMM_BLOCKING=0");
  run.env.insert(run.env.end(), env.begin(), env.end());
  run.timeoutSeconds = 300;
  const ChildResult result = runChild(run);
  // Every run, whatever else its test asks: no rule the stand-ins watch was broken (the
  // sequence of collectives and launches alike on every rank, no NCCL call from our threads,
  // no CUDA after tear-down, no device-wide wait on the program's thread).
  INFO("driver stderr:\n" << result.err);
  CHECK(linesWith(result.out, {"standin violations=0"}).size() == 1);
  CHECK(linesWith(result.err, {"fake-cuda: violations=0"}).size() == 1);
  return result;
}

// What one rank's log says about one communicator.
struct RankView {
  const Asked* asked = nullptr;
  std::vector<std::string> setup, released;
};

// Every communicator (the driver's index) on every rank, alike: the same first call taken
// where eligible, as many calls forwarded as not ready, as many taken; and the stand-ins saw
// the same collectives and the same launches from every rank.
void checkAcrossRanks(const ChildResult& run, const std::vector<Asked>& asked, const char* summary = "released:") {
  std::map<int, std::vector<RankView>> byIndex;
  for (const Asked& one : asked) {
    RankView view;
    view.asked = &one;
    view.setup = infoAbout(run.err, one.comm, "setup:");
    view.released = infoAbout(run.err, one.comm, summary);
    byIndex[one.index].push_back(view);
  }
  for (const auto& [index, views] : byIndex) {
    INFO("communicator index " << index);
    std::set<std::string> firstCalls, notReady, taken, setupKinds;
    for (const RankView& view : views) {
      INFO("rank " << view.asked->rank << " comm " << view.asked->comm);
      REQUIRE(view.setup.size() == 1);
      setupKinds.insert(view.setup[0].rfind("eligible (", 0) == 0 ? "eligible" : "not eligible");
      const std::optional<long long> first = fromCall(view.setup[0]);
      firstCalls.insert(first ? std::to_string(*first) : "none");
      REQUIRE(view.released.size() == 1);
      std::map<std::string, int> byReason;
      REQUIRE(forwardedIn(view.released[0], &byReason) >= 0);
      notReady.insert(std::to_string(byReason["comm-not-ready"]));
      taken.insert(std::to_string(takenIn(view.released[0])));
    }
    CHECK(setupKinds.size() == 1);
    CHECK(firstCalls.size() == 1);  // "from call N": the same N on every rank
    CHECK(notReady.size() == 1);    // forwarded as comm-not-ready: as many on every rank
    CHECK(taken.size() == 1);       // taken: as many on every rank
  }
  CHECK(violations(run.err, "standin: VIOLATION sequence").empty());
  CHECK(violations(run.err, "fake-cuda: VIOLATION launch-").empty());
}

struct Ranks {
  int ranks, calls, communicators;
  bool nonblocking = false;
  bool oppositeOrder = false;   // NCCL_COMM_BLOCKING=0 too
  bool neverDestroyed = false;  // left alive at exit: counted there
};

// The line that counts a communicator's calls: at its release, or at exit for one never destroyed.
const char* summaryOf(const Ranks& shape) { return shape.neverDestroyed ? "alive at exit:" : "released:"; }

ChildResult runRanks(const Ranks& shape) {
  const std::string mode = shape.oppositeOrder ? "opposite-order" : shape.neverDestroyed ? "never-destroyed" : "";
  return runDriver(shape.ranks, shape.calls, shape.communicators, mode, shape.nonblocking || shape.oppositeOrder);
}

// Every call ran on our engine or went to NCCL as too large (every one past 8 MiB, and
// whatever the policy's own limits for a type turn away); a nonblocking communicator's calls
// also while it is set up and inside groups (docs/design.md, "When set-up happens").
// A call NCCL refused is not counted: the one the rank made again (early-call) is. `summary`:
// the line that counts them ("released:", or "alive at exit:" for a communicator never destroyed).
void checkOneRank(const Asked& one, const std::string& err, const std::set<std::string>& allowedReasons,
                  bool nonblocking, const char* summary = "released:") {
  INFO("rank " << one.rank << " comm " << one.comm);
  const std::string setup = onlyInfo(err, one.comm, "setup:");
  CHECK(setup.rfind("eligible (", 0) == 0);
  const std::string released = onlyInfo(err, one.comm, summary);
  const std::string other = std::string(summary) == "released:" ? "alive at exit:" : "released:";
  CHECK(infoAbout(err, one.comm, other).empty());
  std::map<std::string, int> byReason;
  const int forwarded = forwardedIn(released, &byReason);
  REQUIRE(forwarded >= 0);
  int counted = 0;
  for (const auto& [reason, count] : byReason) {
    INFO("forwarded as " << reason);
    CHECK(allowedReasons.count(reason) == 1);
    counted += count;
  }
  CHECK(counted == forwarded);
  // A nonblocking communicator's calls past 8 MiB may go as grouped or not yet ready instead.
  CHECK(byReason["too-large"] + (nonblocking ? byReason["nonblocking-group"] + byReason["comm-not-ready"] : 0) >=
        one.above8MiB);
  CHECK(takenIn(released) + forwarded == one.allReduces);
  CHECK(takenIn(released) > 0);
}

void checkRanks(const Ranks& shape) {
  std::set<std::string> allowedReasons = {"too-large"};
  const bool nonblocking = shape.nonblocking || shape.oppositeOrder;
  if (nonblocking) allowedReasons.insert({"comm-not-ready", "nonblocking-group"});
  const ChildResult run = runRanks(shape);
  INFO(run.out << run.err.substr(0, 6000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  CHECK(linesWith(run.out, {"multi-rank failures=0"}).size() == 1);
  CHECK(carLines(run.err, "WARN").empty());

  const std::vector<Asked> asked = askedOf(run.out);
  REQUIRE(asked.size() == static_cast<std::size_t>(shape.ranks * shape.communicators));
  for (const Asked& one : asked) {
    REQUIRE(one.above8MiB > 0);
    REQUIRE(one.allReduces > one.above8MiB);
    checkOneRank(one, run.err, allowedReasons, nonblocking, summaryOf(shape));
  }
  checkAcrossRanks(run, asked, summaryOf(shape));
  CHECK(violations(run.err, "fake-cuda: VIOLATION device-wide-wait").empty());
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

// A call the plan gives to NCCL (here: too large) is decided on its own facts: the hook asks
// NCCL nothing about the communicator for it (ncclCommGetAsyncError is for calls that may run
// on our kernels, which must not wait for a peer NCCL found broken). So on a communicator set
// up at its creation (from call 0), NCCL is asked once for each call but the too-large ones.
TEST_CASE("multi-rank: a call the plan forwards asks NCCL nothing about its communicator", "[shim][multi-rank]") {
  const ChildResult run = runDriver(2, 60, 1, "", false);
  INFO(run.out << run.err.substr(0, 6000));
  const std::vector<Asked> asked = askedOfCleanExit(run, 2);
  for (const Asked& one : asked) {
    INFO("rank " << one.rank << " comm " << one.comm);
    REQUIRE(fromCall(onlyInfo(run.err, one.comm, "setup:")) == 0);
    std::map<std::string, int> byReason;
    REQUIRE(forwardedIn(onlyInfo(run.err, one.comm, "released:"), &byReason) == byReason["too-large"]);
    REQUIRE(byReason["too-large"] >= one.above8MiB);
    REQUIRE(one.above8MiB > 0);
    const std::size_t asks = linesWith(run.log, {"ncclCommGetAsyncError comm=" + one.comm + " "}).size();
    CHECK(asks == static_cast<std::size_t>(one.allReduces - byReason["too-large"]));
  }
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
    const std::string setup = onlyInfo(run.err, one.comm, "setup:");
    CHECK(setup.rfind("not eligible: the set-up did not complete", 0) == 0);
    const std::string released = onlyInfo(run.err, one.comm, "released:");
    CHECK(takenIn(released) == 0);
    std::map<std::string, int> byReason;
    CHECK(forwardedIn(released, &byReason) == one.allReduces);
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

// ---- Issue 44: each test case below failed on the code before the control plane's rewrite,
// for the finding it names.

// Finding 1: the set-up worker polls ncclCommGetAsyncError itself, beside the program, which
// in NCCL 2.28.9 completes and frees the group job the set-up's group linked. The stand-in
// reports every NCCL call from a thread named car-* (the worker is "car-setup"), and two
// threads inside ncclCommGetAsyncError on one communicator at once.
TEST_CASE("multi-rank: no thread of the library calls NCCL (issue 44, finding 1)",
          "[shim][multi-rank][issue-44]") {
  for (const Ranks& shape : {Ranks{4, 100, 2, true}, Ranks{2, 40, 2, false, true}}) {
    const ChildResult run = runRanks(shape);
    INFO(run.out << run.err.substr(0, 6000));
    REQUIRE_FALSE(run.timedOut);
    REQUIRE(run.exitCode == 0);
    CHECK(violations(run.err, "standin: VIOLATION car-thread").empty());
    CHECK(violations(run.err, "standin: VIOLATION async-error-concurrent").empty());
    CHECK(linesWith(run.out, {"standin violations=0"}).size() == 1);
  }
}

// Finding 2: at exit nothing of ours may call CUDA once the runtime's tear-down can have begun
// (the fake runtime's, registered at its first call, runs after the library's exit handler).
// The process ends while set-ups still wait in the background (exit-in-setup), or just after
// they were let go (end-in-setup).
TEST_CASE("multi-rank: nothing of ours calls CUDA after the runtime's tear-down at exit (issue 44, finding 2)",
          "[shim][multi-rank][issue-44]") {
  for (const std::string mode : {"exit-in-setup", "end-in-setup"}) {
    const ChildResult run = runDriver(3, 10, 2, mode, true);
    INFO(mode << "\n" << run.out << run.err.substr(0, 6000));
    REQUIRE_FALSE(run.timedOut);
    REQUIRE(run.exitCode == 0);
    REQUIRE(linesWith(run.err, {"fake-cuda: at exit:"}).size() == 1);  // the tear-down ran
    CHECK(violations(run.err, "fake-cuda: VIOLATION late-call").empty());
  }
}

namespace {

// "eligible (...; holds N bytes; ...)": N.
std::size_t heldBytes(const std::string& setup) {
  static const std::regex pattern("holds (\\d+) bytes");
  std::smatch match;
  return std::regex_search(setup, match, pattern) ? std::stoull(match[1]) : 0;
}

// Rank r of every communicator on device r of its own, so that a bound on one GPU's memory is
// a bound on one rank's blocks.
// Two GPUs of the fake runtime have no NVLink and no NVML: the test topology says PCIe, where a
// forced push kernel (NCCL_CAR_ALGO) makes a communicator ours without a measured table.
const std::vector<std::string> kDevicePerRank = {"STANDIN_NCCL_DEVICE_PER_RANK=1", "FAKE_CUDA_DEVICES=2",
                                                 "NCCL_CAR_ALGO=1shot"};
const std::string kDevicePerRankTopology = "pcie";

std::vector<std::string> with(std::vector<std::string> env, const std::vector<std::string>& more) {
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

}  // namespace

// Finding 3: a communicator whose ranks never agree on a first call took no call of ours: it
// must let go of its block and its room at once. Rank 1 gives its set-up up once every rank
// mapped every block, before it joins the agreement (NCCL_CAR_TEST_FAULT=
// give-up-before-agreement@1), so rank 0 follows "never" from Agreeing. Under a bound of one
// block per GPU (NCCL_CAR_GPU_MEMORY_BYTES, each rank on a device of its own), a second
// communicator of the same ranks, made while the first is still alive, must then be eligible.
TEST_CASE("multi-rank: a communicator whose ranks never agree leaves room for the next (issue 44, finding 3)",
          "[shim][multi-rank][issue-44]") {
  // One block's bytes, from a communicator set up without the bound.
  const ChildResult sized =
      runDriver(2, 4, 1, "", false, with(kDevicePerRank, {"NCCL_CAR_TEST_FAULT=" + kDevicePerRankTopology}));
  INFO(sized.out << sized.err.substr(0, 4000));
  REQUIRE(sized.exitCode == 0);
  const std::vector<Asked> sizedAsked = askedOf(sized.out);
  REQUIRE_FALSE(sizedAsked.empty());
  const std::string sizedSetup = onlyInfo(sized.err, sizedAsked[0].comm, "setup:");
  const std::size_t block = heldBytes(sizedSetup);
  REQUIRE(block > 0);

  const ChildResult run = runDriver(
      2, 10, 2, "second-comm", false,
      with(kDevicePerRank, {"NCCL_CAR_GPU_MEMORY_BYTES=" + std::to_string(block),
                            "NCCL_CAR_TEST_FAULT=" + kDevicePerRankTopology + ",give-up-before-agreement@1"}));
  INFO(run.out << run.err.substr(0, 8000));
  const std::vector<Asked> asked = askedOfCleanExit(run, 4);
  for (const Asked& one : asked) {
    INFO("rank " << one.rank << " comm " << one.comm << " index " << one.index);
    const std::string setup = onlyInfo(run.err, one.comm, "setup:");
    if (one.index == 0) {
      REQUIRE(setup.rfind("not eligible: ", 0) == 0);  // the ranks never agreed
      if (one.rank == "0") REQUIRE(setup.find("another rank gave up") != std::string::npos);
    } else {
      CHECK(setup.rfind("eligible (", 0) == 0);
    }
  }
  checkAcrossRanks(run, asked);
}

namespace {

// The same, of one rank, in the order printed.
std::vector<double> secondsTakenBy(const std::string& out, int rank, const std::string& what) {
  std::vector<double> seconds;
  const std::regex pattern("^rank " + std::to_string(rank) + " " + what + " took ([0-9.]+) s$");
  for (const std::string& line : splitLines(out)) {
    std::smatch match;
    if (std::regex_match(line, match, pattern)) seconds.push_back(std::stod(match[1]));
  }
  return seconds;
}

// "fake-cuda: at exit: streams=S events=E ...": what is still alive of `what`.
int aliveAtExit(const std::string& err, const std::string& what) {
  const std::regex pattern("^fake-cuda: at exit: .*\\b" + what + "=(\\d+)");
  for (const std::string& line : splitLines(err)) {
    std::smatch match;
    if (std::regex_search(line, match, pattern)) return std::stoi(match[1]);
  }
  return -1;
}

}  // namespace

// Finding 4: a set-up whose step on the worker throws, once its block is published (rank 1 of
// the first communicator: NCCL_CAR_TEST_FAULT=advance-throw@1). Its peers must learn it at
// once (not after NCCL_CAR_SETUP_TIMEOUT_MS), its communicator must leave SettingUp (so that
// its destroy releases it: a released: line), and nothing of it may be leaked: no stream, no
// event alive at exit. The second communicator of the same ranks is set up as usual.
TEST_CASE("multi-rank: a set-up that throws on the worker tells its peers and lets go (issue 44, finding 4)",
          "[shim][multi-rank][issue-44]") {
  constexpr int kRanks = 3;
  const ChildResult run = runDriver(kRanks, 20, 2, "second-comm", false,
                                    {"NCCL_CAR_TEST_FAULT=advance-throw@1", "NCCL_CAR_SETUP_TIMEOUT_MS=10000"});
  INFO(run.out << run.err.substr(0, 8000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  REQUIRE(linesWith(run.err, {"advance-throw"}).size() >= 1);  // the fault fired
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    const std::vector<double> inits = secondsTakenBy(run.out, rank, "init");
    REQUIRE(inits.size() == 2);
    CHECK(inits[0] < 5.0);  // the first communicator's: its bound is 10 s
  }
  std::vector<Asked> second;
  for (const Asked& one : askedOf(run.out)) {
    INFO("rank " << one.rank << " comm " << one.comm << " index " << one.index);
    const std::vector<std::string> setup = infoAbout(run.err, one.comm, "setup:");
    CHECK(setup.size() == 1);
    CHECK(infoAbout(run.err, one.comm, "released:").size() == 1);
    if (one.index == 0 && setup.size() == 1) {
      CHECK(setup[0].rfind("not eligible: ", 0) == 0);
      CHECK(setup[0].find("did not complete within") == std::string::npos);  // not its bound
    }
    if (one.index == 1) second.push_back(one);
  }
  REQUIRE(second.size() == kRanks);
  for (const Asked& one : second) checkOneRank(one, run.err, {"too-large"}, false);
  checkAcrossRanks(run, second);
  CHECK(aliveAtExit(run.err, "streams") == 0);
  CHECK(aliveAtExit(run.err, "events") == 0);
}

namespace {

// System V segments that process `pid` created and that still exist (/proc/sysvipc/shm),
// removed here once listed, so that a failing run leaks nothing into the machine.
std::vector<int> segmentsLeftBy(int pid) {
  std::ifstream table("/proc/sysvipc/shm");
  std::string line;
  std::getline(table, line);  // the header
  std::vector<int> left;
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    long long key = 0, shmid = 0, perms = 0, size = 0, cpid = 0;
    if (!(fields >> key >> shmid >> perms >> size >> cpid)) continue;
    if (cpid == pid) left.push_back(static_cast<int>(shmid));
  }
  for (int id : left) shmctl(id, IPC_RMID, nullptr);
  return left;
}

int driverPid(const std::string& out) {
  const std::regex pattern("^multi-rank pid=(\\d+)$");
  for (const std::string& line : splitLines(out)) {
    std::smatch match;
    if (std::regex_match(line, match, pattern)) return std::stoi(match[1]);
  }
  return -1;
}

}  // namespace

// Finding 5: a board whose creation throws after shmat (NCCL_CAR_TEST_FAULT=board-throw: in
// the bookkeeping that follows it) must already be marked for removal, or the segment outlives
// the process. Afterwards /proc/sysvipc/shm holds no segment the driver created.
TEST_CASE("multi-rank: a release board whose creation fails leaves no System V segment (issue 44, finding 5)",
          "[shim][multi-rank][issue-44]") {
  const ChildResult run = runDriver(2, 10, 1, "", false, {"NCCL_CAR_TEST_FAULT=board-throw"});
  INFO(run.out << run.err.substr(0, 6000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  REQUIRE(linesWith(run.err, {"board-throw"}).size() >= 1);  // the fault fired
  const int pid = driverPid(run.out);
  REQUIRE(pid > 0);
  const std::vector<int> left = segmentsLeftBy(pid);
  INFO(left.size() << " segment(s) left, removed now");
  CHECK(left.empty());
}

// One rank's record-filling throws (NCCL_CAR_TEST_FAULT=record-throw@1, once its board
// exists): that rank must still make the set-up's exchange, or its peers' all-gather would
// meet its next all-reduce in NCCL. Every rank then reaches the same verdict, and the rank
// that threw keeps no board.
TEST_CASE("multi-rank: a rank whose set-up throws before the exchange still takes part in it", "[shim][multi-rank]") {
  const ChildResult run = runDriver(2, 20, 1, "", false, {"NCCL_CAR_TEST_FAULT=record-throw@1"});
  INFO(run.out << run.err.substr(0, 6000));
  const std::vector<Asked> asked = askedOfCleanExit(run, 2);
  for (const Asked& one : asked) {
    INFO("rank " << one.rank);
    const std::string setup = onlyInfo(run.err, one.comm, "setup:");
    CHECK(setup == "not eligible: rank 1 failed before the set-up's exchange (its log says why)");
  }
  checkAcrossRanks(run, asked);
  CHECK(linesWith(run.err, {"NCCL-CAR WARN", "internal error before the set-up's exchange (NCCL_CAR_TEST_FAULT "
                                             "record-throw)"}).size() == 1);
  const int pid = driverPid(run.out);
  REQUIRE(pid > 0);
  CHECK(segmentsLeftBy(pid).empty());
}

// A communicator ended while its set-up, on the worker, is making its launcher (rank 1 of
// each: NCCL_CAR_TEST_FAULT=slow-launcher@1 makes that take 2 s): its release finds no
// launcher to take, so the one that arrives after it must be let go of by the set-up, not
// left on the released communicator: no event of ours alive at exit.
TEST_CASE("multi-rank: a launcher made after its communicator was ended is let go of", "[shim][multi-rank]") {
  const ChildResult run = runDriver(2, 10, 1, "end-at-once", true, {"NCCL_CAR_TEST_FAULT=slow-launcher@1"});
  INFO(run.out << run.err.substr(0, 6000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  CHECK(linesWith(run.err, {"NCCL-CAR INFO", "released during set-up"}).size() +
            linesWith(run.err, {"NCCL-CAR INFO", "setup: not eligible: stopped"}).size() ==
        2);
  CHECK(carLines(run.err, "WARN").empty());
  CHECK(aliveAtExit(run.err, "events") == 0);  // the launcher's
}

// Finding 6, the set-up's claim: a block that meets kept memory of another size on its GPU
// frees that memory (cudaFree, which waits for the whole device). Each rank's second block is
// larger than its first (NCCL_CAR_TEST_FAULT=grow-block), made after the first communicator
// was destroyed on every rank (sequential): no device-wide wait may happen on a thread of the
// program's.
TEST_CASE("multi-rank: a set-up never waits for the whole device on the program's thread (issue 44, finding 6)",
          "[shim][multi-rank][issue-44]") {
  const ChildResult run = runDriver(2, 10, 2, "sequential", false, {"NCCL_CAR_TEST_FAULT=grow-block"});
  INFO(run.out << run.err.substr(0, 6000));
  const std::vector<Asked> asked = askedOfCleanExit(run, 4);
  std::set<std::size_t> sizes;
  for (const Asked& one : asked) {
    INFO("rank " << one.rank << " comm " << one.comm << " index " << one.index);
    const std::string setup = onlyInfo(run.err, one.comm, "setup:");
    REQUIRE(setup.rfind("eligible (", 0) == 0);
    sizes.insert(heldBytes(setup));
  }
  REQUIRE(sizes.size() == 2);  // the two communicators' blocks differ in size
  checkAcrossRanks(run, asked);
  CHECK(violations(run.err, "fake-cuda: VIOLATION device-wide-wait").empty());
}

// Finding 6, the let-go: the worker held the communicator's lock through the retirement of a
// failed set-up's block (up to 2 s: NCCL_CAR_TEST_FAULT=slow-retire@1 makes rank 1's that
// long), so a program's call on that communicator waited behind it. Rank 1 gives its set-up up
// (give-up-before-agreement@1) while both ranks keep calling, 2 ms apart: no call may take long.
TEST_CASE("multi-rank: a program's call does not wait behind the worker's let-go (issue 44, finding 6)",
          "[shim][multi-rank][issue-44]") {
  const ChildResult run = runDriver(2, 500, 1, "", true,
                                    {"NCCL_CAR_TEST_FAULT=give-up-before-agreement@1,slow-retire@1",
                                     "MULTI_RANK_PACED_CALLS=500"});
  INFO(run.out << run.err.substr(0, 6000));
  const std::vector<Asked> asked = askedOfCleanExit(run, 2);
  for (const Asked& one : asked) {
    INFO("rank " << one.rank << " comm " << one.comm);
    if (one.rank == "1") {
      // The fault fired. (Rank 0's set-up may not get further before its release: the one
      // worker is held by rank 1's retirement.)
      const std::string setup = onlyInfo(run.err, one.comm, "setup:");
      REQUIRE(setup.find("give-up-before-agreement") != std::string::npos);
    }
    CHECK(one.slowest < 0.5);
  }
}

// Finding 7: the nonblocking set-up point must follow from the sequence of calls alone. Rank 0
// makes its first all-reduce before NCCL finished creating the communicator, which NCCL
// refuses (ncclInvalidArgument), then waits as NCCL asks and makes it again: a program that
// broke the rule once and recovered. Every rank must still agree on the same first call,
// forward and take alike, and NCCL must see the same collectives from every rank.
TEST_CASE("multi-rank: a call NCCL refused before the communicator was ready moves no rank's set-up point "
          "(issue 44, finding 7)",
          "[shim][multi-rank][issue-44]") {
  const ChildResult run = runDriver(2, 40, 1, "early-call", true);
  INFO(run.out << run.err.substr(0, 6000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  REQUIRE(linesWith(run.out, {"rank 0 early all-reduce refused"}).size() == 1);  // NCCL did refuse it
  const std::vector<Asked> asked = askedOf(run.out);
  REQUIRE(asked.size() == 2);
  for (const Asked& one : asked) {
    checkOneRank(one, run.err, {"too-large", "comm-not-ready", "nonblocking-group"}, true);
  }
  checkAcrossRanks(run, asked);
}

// ---- The PCIe case, made by the test topology (NCCL_CAR_TEST_FAULT=pcie, shim/handshake/topology.h):
// every pair of ranks' GPUs as over PCIe, CUDA and NVML agreeing.

namespace {

// A run that ended well, every call returning ncclSuccess and no WARN: what each thread asked
// of its communicator, `count` of them.
std::vector<Asked> askedOfCleanRun(const ChildResult& run, std::size_t count) {
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  CHECK(linesWith(run.out, {"multi-rank failures=0"}).size() == 1);
  CHECK(carLines(run.err, "WARN").empty());
  const std::vector<Asked> asked = askedOf(run.out);
  REQUIRE(asked.size() == count);
  return asked;
}

constexpr int kPcieRanks = 4;
constexpr std::size_t kPcieOneShotUpTo = 65536;    // the table below: 1shot up to here,
constexpr std::size_t kPcieTwoShotUpTo = 4 << 20;  // 2shot up to here, NCCL above

// A fresh folder for XDG_CACHE_HOME: the library looks for this machine's table there.
std::string freshCache() {
  return makeTempDir("car-pcie-cache");
}

struct Traced {
  std::string type;
  std::size_t bytes;
  std::string kernel;
};

// "rank R all-reduce N x type op (B bytes) -> kernel" TRACE lines: the type, B and the kernel of each.
std::vector<Traced> tracedCalls(const std::string& err) {
  std::vector<Traced> calls;
  static const std::regex pattern(" NCCL-CAR TRACE rank \\d+ all-reduce \\d+ x (\\S+) \\S+ \\((\\d+) bytes\\) -> (\\S+)$");
  for (const std::string& line : splitLines(err)) {
    std::smatch match;
    if (std::regex_search(line, match, pattern)) calls.push_back(Traced{match[1], std::stoull(match[2]), match[3]});
  }
  return calls;
}

// Every communicator rank of a tuned PCIe run: its setup: line (eligible, with `setupHas`) and
// its released: counts, calls taken and forwarded for each of the reasons allowed.
void checkTunedPcieRun(const ChildResult& run, const std::string& setupHas,
                       const std::set<std::string>& allowedReasons) {
  INFO(run.out << run.err.substr(0, 6000));
  const std::vector<Asked> asked = askedOfCleanRun(run, static_cast<std::size_t>(kPcieRanks));
  checkAcrossRanks(run, asked);
  for (const Asked& one : asked) {
    INFO("rank " << one.rank << " comm " << one.comm);
    const std::string setup = onlyInfo(run.err, one.comm, "setup:");
    CHECK(setup.rfind("eligible (same-process peers, pcie (every pair peer-to-peer, PIX at most), sm_90", 0) == 0);
    CHECK(setup.find(setupHas) != std::string::npos);
    const std::string released = onlyInfo(run.err, one.comm, "released:");
    std::map<std::string, int> byReason;
    const int forwarded = forwardedIn(released, &byReason);
    for (const auto& [reason, count] : byReason) {
      INFO("forwarded as " << reason);
      CHECK(allowedReasons.count(reason) == 1);
    }
    CHECK(byReason["too-large"] == one.above8MiB);
    CHECK(takenIn(released) == one.allReduces - forwarded);
    CHECK(takenIn(released) > 0);
    for (const std::string& reason : allowedReasons) {
      INFO("forwarded as " << reason);
      CHECK(byReason[reason] > 0);  // each way to NCCL the table leads to was seen
    }
    CHECK(released.find(" 1stage=0 2stage=0") != std::string::npos);  // never a pull kernel
  }
}

// The setup: line of every rank of an untuned PCIe communicator of `ranks` ranks: not
// eligible, with the links the set-up found, naming the command; no figure of memory held.
std::string untunedSetup(int ranks) {
  return "not eligible: pcie untuned (same-process peers, pcie (every pair peer-to-peer, PIX at most), sm_90): every "
         "call goes to NCCL (untuned) until `nccl-car tune` has measured " + std::to_string(ranks) +
         " ranks over PCIe on this machine";
}

// Every communicator rank of an untuned PCIe run: that setup: line, and every call it made
// forwarded as untuned (the too-large ones as well: the communicator takes nothing at all).
void checkUntunedPcieRun(const ChildResult& run, int ranks, std::size_t communicators = 1) {
  INFO(run.out << run.err.substr(0, 6000));
  const std::vector<Asked> asked = askedOfCleanRun(run, static_cast<std::size_t>(ranks) * communicators);
  checkAcrossRanks(run, asked);
  for (const Asked& one : asked) {
    INFO("rank " << one.rank << " comm " << one.comm << " index " << one.index);
    const std::string setup = onlyInfo(run.err, one.comm, "setup:");
    CHECK(setup == untunedSetup(ranks));
    const std::string released = onlyInfo(run.err, one.comm, "released:");
    CHECK(released.find("taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes)") == 0);
    std::map<std::string, int> byReason;
    CHECK(forwardedIn(released, &byReason) == one.allReduces);
    CHECK(byReason == std::map<std::string, int>{{"untuned", one.allReduces}});
  }
  CHECK(linesWith(run.err, {"setup: eligible ("}).empty());
}

}  // namespace

TEST_CASE("multi-rank: over PCIe, every call goes to NCCL (untuned) until a table measured it, the 2-rank case "
          "too, and the communicator holds nothing", "[shim][multi-rank][pcie]") {
  for (int ranks : {2, kPcieRanks}) {
    CAPTURE(ranks);
    const std::string cache = freshCache();
    const ChildResult run = runDriver(ranks, 60, 1, "", false,
                                      {"NCCL_CAR_TEST_FAULT=pcie", "XDG_CACHE_HOME=" + cache});
    checkUntunedPcieRun(run, ranks);
    std::filesystem::remove_all(cache);
  }
}

// An untuned PCIe communicator lets go of its block as soon as its verdict is known, not at
// its destroy: under a bound of one block per GPU (each rank on a device of its own), a second
// communicator of the same ranks, made while the first is still alive, finds room for its own
// block, and reaches the same verdict instead of "no room". A forced push kernel
// (NCCL_CAR_ALGO, how nccl-car tune times an unmeasured machine) keeps one eligible.
TEST_CASE("multi-rank: an untuned PCIe communicator lets go of its block at its verdict; a forced push kernel keeps "
          "it eligible", "[shim][multi-rank][pcie]") {
  const std::string cache = freshCache();
  const std::vector<std::string> perRank = {"STANDIN_NCCL_DEVICE_PER_RANK=1", "FAKE_CUDA_DEVICES=2",
                                            "NCCL_CAR_TEST_FAULT=pcie", "XDG_CACHE_HOME=" + cache};
  // Forced: eligible, and one block's bytes.
  const ChildResult forced = runDriver(2, 4, 1, "", false, with(perRank, {"NCCL_CAR_ALGO=1shot"}));
  INFO(forced.out << forced.err.substr(0, 4000));
  REQUIRE(forced.exitCode == 0);
  const std::vector<Asked> forcedAsked = askedOf(forced.out);
  REQUIRE(forcedAsked.size() == 2);
  std::size_t block = 0;
  for (const Asked& one : forcedAsked) {
    const std::string setup = onlyInfo(forced.err, one.comm, "setup:");
    CHECK(setup.rfind("eligible (same-process peers, pcie (every pair peer-to-peer, PIX at most), sm_90", 0) == 0);
    CHECK(setup.find("); pcie forced: NCCL_CAR_ALGO=1shot takes the all-reduces it can run; every other call goes "
                        "to NCCL (untuned) until `nccl-car tune` has measured 2 ranks over PCIe on this machine") !=
          std::string::npos);
    block = heldBytes(setup);
  }
  REQUIRE(block > 0);
  checkAcrossRanks(forced, forcedAsked);

  const ChildResult run = runDriver(2, 10, 2, "second-comm", false,
                                    with(perRank, {"NCCL_CAR_GPU_MEMORY_BYTES=" + std::to_string(block)}));
  checkUntunedPcieRun(run, 2, 2);
  CHECK(linesWith(run.err, {"no room for another buffer block"}).empty());
  std::filesystem::remove_all(cache);
}

TEST_CASE("multi-rank: over PCIe across CPU sockets, only NCCL_P2P_LEVEL=SYS makes a communicator eligible",
          "[shim][multi-rank][pcie]") {
  ChildResult run = runDriver(2, 20, 1, "", false, {"NCCL_CAR_TEST_FAULT=pcie-sys"});
  INFO(run.err.substr(0, 4000));
  REQUIRE(run.exitCode == 0);
  CHECK(linesWith(run.err, {"NCCL-CAR INFO", "setup: not eligible: rank 0 and rank 1 are on different CPU sockets "
                                             "(PCIe path SYS); NCCL_P2P_LEVEL=SYS would allow peer-to-peer access "
                                             "across them"}).size() == 2);
  CHECK(carLines(run.err, "WARN").empty());  // a topology we do not serve, not a fault
  // The links pass; untuned, the communicator is the PCIe case that nothing measured (its line names them).
  run = runDriver(2, 20, 1, "", false, {"NCCL_CAR_TEST_FAULT=pcie-sys", "NCCL_P2P_LEVEL=SYS"});
  CHECK(linesWith(run.err, {"setup: not eligible: pcie untuned (same-process peers, pcie (every pair peer-to-peer, "
                            "SYS at most)"}).size() == 2);
  // NCCL_P2P_LEVEL=PIX keeps the pairs through one switch, and no further.
  run = runDriver(2, 20, 1, "", false, {"NCCL_CAR_TEST_FAULT=pcie", "NCCL_P2P_LEVEL=PIX"});
  CHECK(linesWith(run.err, {"setup: not eligible: pcie untuned (same-process peers, pcie ("}).size() == 2);
  run = runDriver(2, 20, 1, "", false, {"NCCL_CAR_TEST_FAULT=pcie", "NCCL_P2P_LEVEL=NVL"});
  CHECK(linesWith(run.err, {"setup: not eligible: NCCL_P2P_LEVEL on rank 0 allows peer-to-peer access over NVLink "
                            "only"}).size() == 2);
}

TEST_CASE("multi-rank: over PCIe, a table measured for the case is followed size by size, and nothing else is taken",
          "[shim][multi-rank][pcie]") {
  const std::string cache = freshCache();
  const std::vector<std::string> env = {"NCCL_CAR_TEST_FAULT=pcie", "XDG_CACHE_HOME=" + cache};
  // The first run says where this machine's table would be (its fingerprint is in the name).
  ChildResult run = runDriver(kPcieRanks, 20, 1, "", false, env);
  std::smatch found;
  const std::regex where("no choice table for this machine \\(([^)]+/nccl-car/([0-9a-f]{16})\\.table)\\)");
  REQUIRE(std::regex_search(run.err, found, where));
  const std::string path = found[1];
  const std::string fingerprint = found[2];
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  {
    // Rows for the floating types up to 32 bits (families half and float); none for the
    // integers the driver also sends (family split), which stay untuned.
    std::ofstream table(path);
    table << "nccl-car choice table 2\nfingerprint " << fingerprint << "\nmachine the fake CUDA machine\n";
    for (const char* family : {"half", "float"}) {
      table << "all-reduce " << kPcieRanks << " pcie " << family << " 0 " << kPcieOneShotUpTo << " 1shot\n"
            << "all-reduce " << kPcieRanks << " pcie " << family << " " << kPcieOneShotUpTo + 1 << " "
            << kPcieTwoShotUpTo << " 2shot\n"
            << "all-reduce " << kPcieRanks << " pcie " << family << " " << kPcieTwoShotUpTo + 1 << " 8388608 nccl\n";
    }
    table << "all-reduce " << kPcieRanks << " nvlink any 0 8388608 1shot\n";  // another case: never ours here
  }
  std::vector<std::string> traced = env;
  traced.push_back("NCCL_CAR_DEBUG=TRACE");
  run = runDriver(kPcieRanks, 60, 1, "", false, traced);
  checkTunedPcieRun(run, "); pcie tuned: the choice table's rows for 4 ranks over PCIe decide",
                    {"tuned", "untuned", "too-large"});
  const std::vector<Traced> calls = tracedCalls(run.err);
  REQUIRE_FALSE(calls.empty());
  std::set<std::string> kernels;
  for (const Traced& call : calls) {
    CAPTURE(call.type, call.bytes, call.kernel);
    CHECK(call.type != "int32");  // no row: untuned
    CHECK(call.kernel == (call.bytes <= kPcieOneShotUpTo ? "1shot" : "2shot"));
    CHECK(call.bytes <= kPcieTwoShotUpTo);
    kernels.insert(call.kernel);
  }
  CHECK(kernels == std::set<std::string>{"1shot", "2shot"});
  std::filesystem::remove_all(cache);
}
