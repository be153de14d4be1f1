// Ranks that are threads of one process, over the stand-in's exchange (STANDIN_NCCL_EXCHANGE=1)
// with libnccl-car.so built over the fake CUDA runtime (tests/fake_cuda/): every multi-rank
// communicator is set up for real, found eligible, and takes its all-reduces on our engine
// but the ones too large; ThreadSanitizer runs the same driver (tests/tsan/run-tsan.sh).
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
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
  return runDriver(shape.ranks, shape.calls, shape.communicators, shape.oppositeOrder ? "opposite-order" : "",
                   shape.nonblocking || shape.oppositeOrder);
}

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

void checkRanks(const Ranks& shape) {
  std::set<std::string> allowedReasons = {"too-large"};
  if (shape.nonblocking || shape.oppositeOrder) allowedReasons.insert({"comm-not-ready", "nonblocking-group"});
  const ChildResult run = runRanks(shape);
  INFO(run.out << run.err.substr(0, 6000));
  for (const Asked& one : askedOfCleanRun(run, static_cast<std::size_t>(shape.ranks * shape.communicators))) {
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

// ---- The PCIe case, made by the test topology (NCCL_CAR_TEST_FAULT=pcie, shim/handshake/topology.h):
// every pair of ranks' GPUs as over PCIe, CUDA and NVML agreeing.

namespace {

constexpr int kPcieRanks = 4;
constexpr std::size_t kPcieOneShotUpTo = 65536;    // the table below: 1shot up to here,
constexpr std::size_t kPcieTwoShotUpTo = 4 << 20;  // 2shot up to here, NCCL above

// A fresh folder for XDG_CACHE_HOME: the library looks for this machine's table there.
std::string freshCache() {
  char folder[] = "/tmp/car-pcie-cache-XXXXXX";
  REQUIRE(mkdtemp(folder) != nullptr);
  return folder;
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

// Every communicator rank's setup: line and released: counts, with the reasons allowed.
void checkPcieRun(const ChildResult& run, const std::string& setupHas, const std::set<std::string>& allowedReasons,
                  bool taken) {
  INFO(run.out << run.err.substr(0, 6000));
  for (const Asked& one : askedOfCleanRun(run, static_cast<std::size_t>(kPcieRanks))) {
    INFO("rank " << one.rank << " comm " << one.comm);
    const std::vector<std::string> setup = infoAbout(run.err, one.comm, "setup:");
    REQUIRE(setup.size() == 1);
    CHECK(setup[0].rfind("eligible (same-process peers, pcie (every pair peer-to-peer, PIX at most), sm_90", 0) == 0);
    CHECK(setup[0].find(setupHas) != std::string::npos);
    const std::vector<std::string> released = infoAbout(run.err, one.comm, "released:");
    REQUIRE(released.size() == 1);
    std::map<std::string, int> byReason;
    const int forwarded = forwardedIn(released[0], &byReason);
    for (const auto& [reason, count] : byReason) {
      INFO("forwarded as " << reason);
      CHECK(allowedReasons.count(reason) == 1);
    }
    CHECK(byReason["too-large"] == one.above8MiB);
    if (taken) {
      CHECK(takenIn(released[0]) == one.allReduces - forwarded);
      CHECK(takenIn(released[0]) > 0);
      for (const std::string& reason : allowedReasons) {
        INFO("forwarded as " << reason);
        CHECK(byReason[reason] > 0);  // each way to NCCL the table leads to was seen
      }
      CHECK(released[0].find(" 1stage=0 2stage=0") != std::string::npos);  // never a pull kernel
    } else {
      CHECK(takenIn(released[0]) == 0);
      CHECK(byReason["untuned"] == one.allReduces - one.above8MiB);
    }
  }
}

}  // namespace

TEST_CASE("multi-rank: over PCIe, every call goes to NCCL (untuned) until a table measured it, the 2-rank case "
          "too", "[shim][multi-rank][pcie]") {
  for (int ranks : {2, kPcieRanks}) {
    CAPTURE(ranks);
    const ChildResult run = runDriver(ranks, 60, 1, "", false,
                                      {"NCCL_CAR_TEST_FAULT=pcie", "XDG_CACHE_HOME=" + freshCache()});
    if (ranks == kPcieRanks) {
      checkPcieRun(run, "); pcie untuned: every call goes to NCCL (untuned) until `nccl-car tune` has measured 4 "
                        "ranks over PCIe on this machine", {"untuned", "too-large"}, false);
    } else {
      INFO(run.err.substr(0, 4000));
      CHECK(linesWith(run.err, {"setup: eligible (same-process peers, pcie (", "pcie untuned"}).size() == 2);
      CHECK(linesWith(run.err, {"released: taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0"})
                .size() == 2);
    }
  }
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
  run = runDriver(2, 20, 1, "", false, {"NCCL_CAR_TEST_FAULT=pcie-sys", "NCCL_P2P_LEVEL=SYS"});
  CHECK(linesWith(run.err, {"setup: eligible (same-process peers, pcie (every pair peer-to-peer, SYS at most)"}).size() == 2);
  // NCCL_P2P_LEVEL=PIX keeps the pairs through one switch, and no further.
  run = runDriver(2, 20, 1, "", false, {"NCCL_CAR_TEST_FAULT=pcie", "NCCL_P2P_LEVEL=PIX"});
  CHECK(linesWith(run.err, {"setup: eligible (same-process peers, pcie ("}).size() == 2);
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
  checkPcieRun(run, "); pcie tuned: the choice table's rows for 4 ranks over PCIe decide",
               {"tuned", "untuned", "too-large"}, true);
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
