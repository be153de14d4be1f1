// Random all-reduces, valid and invalid (driver scenario "fuzz", driver_fuzz.cc), through the
// shim. Here every communicator is ineligible (no GPU, or 1 rank), so every call must reach
// NCCL exactly once with exactly the caller's arguments, on live, stale (destroyed) and
// null communicators alike, and the caller must get exactly NCCL's result. The process must
// not crash (most buffers are fake addresses: neither the shim nor the stand-in may touch
// them), and each communicator's released: line must count exactly the all-reduces it
// forwarded while alive. (The scenario also runs under ThreadSanitizer: tests/tsan/run-tsan.sh.)
#include <catch2/catch.hpp>
#include <nccl.h>

#include <map>
#include <sstream>

#include "call_checks.h"
#include "fuzz_coverage.h"

using namespace shimtest;

namespace {

struct FuzzRun {
  unsigned seed;
  int count;
  int threads;
  std::vector<std::string> env;  // besides NCCL_CAR_DEBUG=INFO
};

std::string describe(const FuzzRun& run) {
  std::ostringstream text;
  text << "fuzz seed " << run.seed << ", " << run.count << " calls, " << run.threads << " thread(s)";
  for (const std::string& setting : run.env) text << ", " << setting;
  return text.str();
}

std::string setting(const FuzzRun& run, const std::string& name) {
  for (const std::string& entry : run.env) {
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
  }
  return "";
}

// The log's lines by the thread that wrote them: the driver's markers end with the caller's
// tid= as the stand-in's own lines do.
std::map<std::string, std::string> logByThread(const std::string& log) {
  std::map<std::string, std::string> byThread;
  for (const std::string& line : splitLines(log)) {
    const std::size_t at = line.rfind(" tid=");
    const std::string tid = at == std::string::npos ? "?" : line.substr(at + 5);
    byThread[tid] += line + "\n";
  }
  return byThread;
}

// Collects what went wrong (the first 30 things), to report them together.
class Problems {
 public:
  void add(const std::string& step, const std::string& what) {
    ++count_;
    if (count_ <= 30) text_ += "  " + step + ": " + what + "\n";
  }
  int count() const { return count_; }
  const std::string& text() const { return text_; }

 private:
  int count_ = 0;
  std::string text_;
};

struct CommLife {
  bool live = true;
  bool nonblocking = false;  // made by ncclCommInitRank while NCCL_COMM_BLOCKING=0
  std::size_t allReduces = 0;  // forwarded while alive, and taken by NCCL
};
using Comms = std::map<std::string, CommLife>;  // every communicator NCCL made, by handle

// What the run's settings make of every step.
struct RunFacts {
  std::string forcedResult;  // STANDIN_NCCL_RESULT_ncclAllReduce, or ""
  bool nonblocking = false;  // NCCL_COMM_BLOCKING=0
  const Outputs& outputs;    // what the driver printed after each step
};

// One thread's walk through its steps, so far.
struct ThreadWalk {
  std::size_t allReduces = 0;
  std::string prefix;  // its steps' label prefix ("t3." with several threads)
  int groupDepth = 0;
  FuzzCoverage coverage;
};

// The step's call reached NCCL exactly once, with exactly the caller's arguments, and the
// caller got exactly what NCCL returned and made. Anything else in the step must be the
// shim's own set-up traffic, and that only where the shim sets communicators up.
void checkCallAsMade(const Segment& segment, const StepView& view, const RunFacts& run, Problems& problems) {
  const Call& seen = *view.caller;
  for (const auto& [key, value] : segment.expected.args) {
    if (seen.get(key) != value) problems.add(segment.label, key + "=" + value + " reached NCCL as " + seen.raw);
  }
  const bool setupHere = segment.label.find("init") != std::string::npos ||
                         (run.nonblocking && (seen.name == "ncclAllReduce" || seen.name == "ncclGroupEnd"));
  for (const auto* list : {&view.before, &view.after}) {
    for (const Call* other : *list) {
      if (!isSetupTraffic(*other) || !setupHere) problems.add(segment.label, "NCCL also saw: " + other->raw);
    }
  }
  const auto output = run.outputs.find(segment.label);
  if (output == run.outputs.end()) {
    problems.add(segment.label, "the driver printed no result");
    return;
  }
  for (const auto& [key, value] : output->second.args) {
    if (seen.get(key) != value) {
      problems.add(segment.label, "the caller got " + key + "=" + value + ", NCCL gave " + seen.raw);
    }
  }
}

// Communicators made (each once) and destroyed (only while alive).
void followCommunicators(const Segment& segment, const Call& seen, const RunFacts& run, Comms& comms,
                         ThreadWalk& walk, Problems& problems) {
  if (seen.name == "ncclCommInitRank" || seen.name == "ncclCommInitAll") {
    for (const std::string& made : split(seen.get("made"), ',')) {
      if (made == "0x0") continue;
      CommLife life;
      life.nonblocking = run.nonblocking && seen.name == "ncclCommInitRank";
      if (!comms.emplace(made, life).second) problems.add(segment.label, "NCCL made " + made + " twice");
    }
    walk.prefix = segment.label.substr(0, segment.label.find("init"));
  } else if (seen.name == "ncclCommDestroy") {
    const auto comm = comms.find(seen.get("comm"));
    if (comm == comms.end() || !comm->second.live) problems.add(segment.label, "destroyed a communicator not alive");
    else comm->second.live = false;
  }
}

// An all-reduce: on a communicator NCCL made (or null), seen as stale exactly when it was,
// answered as NCCL answers it there; counted for its communicator while alive.
void checkAllReduce(const Segment& segment, const Call& seen, const RunFacts& run, Comms& comms, ThreadWalk& walk,
                    Problems& problems) {
  ++walk.allReduces;
  const std::string handle = seen.get("comm");
  const auto comm = comms.find(handle);
  const bool live = comm != comms.end() && comm->second.live;
  const bool stale = comm != comms.end() && !comm->second.live;
  if (handle != "0x0" && comm == comms.end()) problems.add(segment.label, "a communicator NCCL never made");
  // The stand-in saw a stale communicator as stale (dead=1), and nothing else.
  if (seen.has("dead") != stale) problems.add(segment.label, "dead= does not match the communicator: " + seen.raw);
  const std::string normal = live ? "0" : std::to_string(static_cast<int>(ncclInvalidArgument));
  if (seen.get("result") != (run.forcedResult.empty() ? normal : run.forcedResult)) {
    problems.add(segment.label, "NCCL returned " + seen.raw);
  }
  // Counted are the calls NCCL took (a group's are settled at its end, which the stand-in
  // never refuses here).
  const std::string result = seen.get("result");
  const bool took = result == "0" || result == std::to_string(static_cast<int>(ncclInProgress)) || walk.groupDepth > 0;
  if (live && took) ++comm->second.allReduces;
  walk.coverage.note(seen, stale, walk.groupDepth > 0);
}

// Every step of one thread; returns how many steps it had.
std::size_t checkThread(const std::string& tid, const std::string& log, const FuzzRun& fuzz, const RunFacts& run,
                        Comms& comms, Problems& problems) {
  const std::vector<Segment> segments = parseLog(log);
  REQUIRE_FALSE(segments.empty());
  if (segments.front().label.empty()) problems.add("thread " + tid, "NCCL saw calls before the first step");
  ThreadWalk walk;
  std::size_t steps = 0;
  for (const Segment& segment : segments) {
    if (segment.label.empty()) continue;
    ++steps;
    const StepView view = viewOf(segment);
    if (view.caller == nullptr) {
      problems.add(segment.label, "never reached NCCL: " + segment.expected.raw);
      continue;
    }
    checkCallAsMade(segment, view, run, problems);
    const Call& seen = *view.caller;
    if (seen.name == "ncclGroupStart") ++walk.groupDepth;
    if (seen.name == "ncclGroupEnd") --walk.groupDepth;
    if (seen.name == "ncclAllReduce") checkAllReduce(segment, seen, run, comms, walk, problems);
    else followCommunicators(segment, seen, run, comms, walk, problems);
  }
  for (const std::string& kind : walk.coverage.missing()) problems.add("thread " + tid, "no all-reduce with " + kind);
  if (walk.groupDepth != 0) problems.add("thread " + tid, "groups left open");
  if (walk.allReduces != static_cast<std::size_t>(fuzz.count)) {
    problems.add("thread " + tid, std::to_string(walk.allReduces) + " all-reduces reached NCCL");
  }
  const auto summary = run.outputs.find(walk.prefix + "fuzz");
  if (summary == run.outputs.end() || summary->second.get("allreduces") != std::to_string(fuzz.count)) {
    problems.add("thread " + tid, "the driver's count of all-reduces is missing or wrong");
  }
  return steps;
}

// A released: line counts every all-reduce forwarded while the communicator lived, each
// for its ineligibility; a nonblocking one first used inside a group may count some as
// not ready yet instead ("(ineligible-comm=a not-ready=b)", a + b == count, in either
// order or alone).
bool releasedLineFits(const std::string& line, const CommLife& life) {
  const std::string taken = "taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded ";
  const std::string count = std::to_string(life.allReduces);
  if (line == taken + count + (life.allReduces == 0 ? "" : " (ineligible-comm=" + count + ")")) return true;
  if (!life.nonblocking) return false;
  if (line.rfind(taken + count + " (", 0) != 0 || line.back() != ')') return false;
  const std::string reasons = line.substr(taken.size() + count.size() + 2);
  std::size_t sum = 0;
  for (const std::string& reason : split(reasons.substr(0, reasons.size() - 1), ' ')) {
    const std::size_t equals = reason.find('=');
    const std::string name = reason.substr(0, equals);
    if (equals == std::string::npos || (name != "ineligible-comm" && name != "comm-not-ready")) return false;
    sum += std::stoull(reason.substr(equals + 1));
  }
  return sum == life.allReduces;
}

// Each communicator's counters at destroy; stale uses counted nowhere. A nonblocking
// communicator destroyed before its first all-reduce was never set up: it says nothing; nor
// does one whose every all-reduce met NCCL still creating it (the stand-in says so to the
// first STANDIN_NCCL_ASYNC_POLLS looks, 2).
void checkReleasedLines(const std::string& err, const Comms& comms, Problems& problems) {
  for (const auto& [handle, life] : comms) {
    const std::vector<std::string> released = infoAbout(err, handle, "released:");
    const std::string count = std::to_string(life.allReduces);
    if (life.live) problems.add("comm " + handle, "never destroyed");
    if (life.nonblocking && life.allReduces == 0) {
      if (!released.empty()) problems.add("comm " + handle, "released: " + released[0]);
      continue;
    }
    if (life.nonblocking && life.allReduces <= 2 && released.empty()) continue;
    if (released.size() != 1) {
      problems.add("comm " + handle,
                   std::to_string(released.size()) + " released: lines for " + count + " all-reduces");
    } else if (!releasedLineFits(released[0], life)) {
      problems.add("comm " + handle, "released: " + released[0] + " after " + count + " all-reduces");
    }
  }
}

void checkFuzzRun(const FuzzRun& fuzz) {
  INFO(describe(fuzz));
  std::vector<std::string> env = fuzz.env;
  env.push_back("NCCL_CAR_DEBUG=INFO");
  std::vector<std::string> args = {"fuzz", std::to_string(fuzz.seed), std::to_string(fuzz.count)};
  if (fuzz.threads != 1) args.push_back(std::to_string(fuzz.threads));
  const ChildResult result = runDriver(args, env);

  INFO("stdout (end):\n" << result.out.substr(result.out.size() > 2000 ? result.out.size() - 2000 : 0)
                         << "stderr (start):\n" << result.err.substr(0, 8000));
  REQUIRE_FALSE(result.timedOut);
  REQUIRE(result.signal == 0);  // no crash
  REQUIRE(result.exitCode == 0);
  REQUIRE(linesWith(result.out, {"done"}).size() == 1);
  CHECK(linesWith(result.err, {"internal error"}).empty());  // no exception escaped into guarded()

  const Outputs outputs = parseOutputs(result.out);
  const RunFacts run{setting(fuzz, "STANDIN_NCCL_RESULT_ncclAllReduce"), setting(fuzz, "NCCL_COMM_BLOCKING") == "0",
                     outputs};
  const std::map<std::string, std::string> threads = logByThread(result.log);
  REQUIRE(threads.size() == static_cast<std::size_t>(fuzz.threads));

  Problems problems;
  Comms comms;
  std::size_t steps = 0;
  for (const auto& [tid, log] : threads) steps += checkThread(tid, log, fuzz, run, comms, problems);
  // Every step the driver made was marked in the log (and checked above).
  std::size_t printed = 0;
  for (const auto& [label, output] : outputs) printed += output.has("result") ? 1 : 0;
  if (printed != steps) {
    problems.add("run", std::to_string(printed) + " steps printed, " + std::to_string(steps) + " in the log");
  }
  checkReleasedLines(result.err, comms, problems);
  REQUIRE(comms.size() == static_cast<std::size_t>(fuzz.threads) * 7);  // 1 + 1 + 2 + 3 each

  INFO(problems.count() << " problem(s):\n" << problems.text());
  CHECK(problems.count() == 0);
}

}  // namespace

TEST_CASE("fuzz: random valid and invalid all-reduces are forwarded unchanged, exactly once", "[shim][fuzz]") {
  const FuzzRun fuzz = GENERATE(values<FuzzRun>({
      {1, 2000, 1, {}},
      {2, 2000, 1, {"STANDIN_NCCL_RESULT_ncclAllReduce=3"}},  // ncclInternalError, whatever the arguments
      {3, 2000, 1, {"NCCL_CAR_MAX_BYTES=16", "NCCL_CAR_ALGO=2stage"}},
      {4, 2000, 1, {"STANDIN_NCCL_RESULT_ncclAllReduce=7"}},  // ncclInProgress
      {5, 2000, 1, {"NCCL_COMM_BLOCKING=0"}},                 // 1-rank communicators set up lazily
      {6, 1000, 4, {}},                                       // threads at once, each on its own
      {7, 1000, 4, {"NCCL_COMM_BLOCKING=0", "STANDIN_NCCL_RESULT_ncclAllReduce=1"}},
  }));
  checkFuzzRun(fuzz);
}
