// Random all-reduces, valid and invalid (driver scenario "fuzz", driver_fuzz.cc), through the
// shim. Here every communicator is ineligible (no GPU, or 1 rank), so every call must reach
// NCCL exactly once with exactly the caller's arguments, on live, stale (destroyed) and
// null communicators alike, and the caller must get exactly NCCL's result. The process must
// not crash (most buffers are fake addresses: neither the shim nor the stand-in may touch
// them), and each communicator's released: line must count exactly the all-reduces it
// forwarded while alive. (The scenario also runs under ThreadSanitizer: tests/tsan/run-tsan.sh.)
#include <catch2/catch.hpp>
#include <nccl.h>

#include <cstdint>
#include <map>
#include <set>
#include <sstream>

#include "call_checks.h"

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

// What kinds of argument one thread's all-reduces covered.
class Coverage {
 public:
  void note(const Call& call, bool stale, bool inGroup) {
    seen_.insert("datatype=" + call.get("datatype"));
    seen_.insert("op=" + call.get("op"));
    for (const char* key : {"sendbuff", "recvbuff"}) seen_.insert(std::string(key) + ":" + alignment(call.get(key)));
    const std::string count = call.get("count");
    if (count == "0" || count == std::to_string(SIZE_MAX)) seen_.insert("count=" + count);
    if (count.size() >= 19) seen_.insert("count:huge");
    if (count != "0" && (std::stoull(count) & 1) == 1) seen_.insert("count:odd");
    const std::string comm = call.get("comm");
    seen_.insert(comm == "0x0" ? "comm:null" : stale ? "comm:stale" : "comm:live");
    seen_.insert(call.get("stream") == "0x0" ? "stream:null" : "stream:set");
    if (call.get("sendbuff") == call.get("recvbuff")) seen_.insert("in-place");
    if (inGroup) seen_.insert("in-group");
  }
  // Every kind the brief of the fuzz asks for.
  std::vector<std::string> missing() const {
    std::vector<std::string> wanted = {"count=0", "count=" + std::to_string(SIZE_MAX), "count:huge", "count:odd",
                                       "comm:null", "comm:stale", "comm:live", "stream:null", "stream:set",
                                       "in-place", "in-group"};
    for (const char* key : {"sendbuff", "recvbuff"}) {
      for (const char* kind : {"null", "odd", "2", "4", "8", "aligned"}) wanted.push_back(std::string(key) + ":" + kind);
    }
    for (int type = 0; type < ncclNumTypes; ++type) wanted.push_back("datatype=" + std::to_string(type));
    for (int op = 0; op < ncclNumOps; ++op) wanted.push_back("op=" + std::to_string(op));
    for (int value : {-1, static_cast<int>(ncclNumTypes), 1000}) wanted.push_back("datatype=" + std::to_string(value));
    for (int value : {-1, static_cast<int>(ncclNumOps), 1000}) wanted.push_back("op=" + std::to_string(value));
    std::vector<std::string> absent;
    for (const std::string& kind : wanted) {
      if (seen_.count(kind) == 0) absent.push_back(kind);
    }
    return absent;
  }

 private:
  static std::string alignment(const std::string& hex) {
    const unsigned long long address = std::stoull(hex, nullptr, 16);
    if (address == 0) return "null";
    if (address % 2 == 1) return "odd";
    if (address % 4 == 2) return "2";
    if (address % 8 == 4) return "4";
    if (address % 16 == 8) return "8";
    return "aligned";
  }
  std::set<std::string> seen_;
};

struct CommLife {
  bool live = true;
  bool nonblocking = false;  // made by ncclCommInitRank while NCCL_COMM_BLOCKING=0
  std::size_t allReduces = 0;  // forwarded while alive
};

void checkFuzzRun(const FuzzRun& fuzz) {
  INFO(describe(fuzz));
  std::vector<std::string> env = fuzz.env;
  env.push_back("NCCL_CAR_DEBUG=INFO");
  std::vector<std::string> args = {"fuzz", std::to_string(fuzz.seed), std::to_string(fuzz.count)};
  if (fuzz.threads != 1) args.push_back(std::to_string(fuzz.threads));
  const ChildResult run = runDriver(args, env);

  INFO("stdout (end):\n" << run.out.substr(run.out.size() > 2000 ? run.out.size() - 2000 : 0)
                         << "stderr (start):\n" << run.err.substr(0, 8000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.signal == 0);  // no crash
  REQUIRE(run.exitCode == 0);
  REQUIRE(linesWith(run.out, {"done"}).size() == 1);
  CHECK(linesWith(run.err, {"internal error"}).empty());  // no exception escaped into guarded()

  const std::string forced = setting(fuzz, "STANDIN_NCCL_RESULT_ncclAllReduce");
  const bool nonblocking = setting(fuzz, "NCCL_COMM_BLOCKING") == "0";
  const Outputs outputs = parseOutputs(run.out);
  const std::map<std::string, std::string> threads = logByThread(run.log);
  REQUIRE(threads.size() == static_cast<std::size_t>(fuzz.threads));

  Problems problems;
  std::map<std::string, CommLife> comms;  // every communicator NCCL made, by handle
  std::size_t steps = 0;
  for (const auto& [tid, log] : threads) {
    const std::vector<Segment> segments = parseLog(log);
    REQUIRE_FALSE(segments.empty());
    if (segments.front().label.empty()) problems.add("thread " + tid, "NCCL saw calls before the first step");
    std::size_t allReduces = 0;
    std::string prefix;
    Coverage coverage;
    int groupDepth = 0;
    for (const Segment& segment : segments) {
      if (segment.label.empty()) continue;
      ++steps;
      const StepView view = viewOf(segment);
      if (view.caller == nullptr) {
        problems.add(segment.label, "never reached NCCL: " + segment.expected.raw);
        continue;
      }
      const Call& seen = *view.caller;
      // Exactly the caller's arguments (and thread).
      for (const auto& [key, value] : segment.expected.args) {
        if (seen.get(key) != value) problems.add(segment.label, key + "=" + value + " reached NCCL as " + seen.raw);
      }
      // Exactly once: anything else in the step is the shim's own setup traffic, and that
      // only where the shim sets communicators up.
      const bool setupHere = segment.label.find("init") != std::string::npos ||
                             (nonblocking && (seen.name == "ncclAllReduce" || seen.name == "ncclGroupEnd"));
      for (const auto* list : {&view.before, &view.after}) {
        for (const Call* other : *list) {
          if (!isSetupTraffic(*other) || !setupHere) problems.add(segment.label, "NCCL also saw: " + other->raw);
        }
      }
      // The caller got exactly what NCCL returned and made.
      const auto output = outputs.find(segment.label);
      if (output == outputs.end()) {
        problems.add(segment.label, "the driver printed no result");
      } else {
        for (const auto& [key, value] : output->second.args) {
          if (seen.get(key) != value) problems.add(segment.label, "the caller got " + key + "=" + value + ", NCCL gave " + seen.raw);
        }
      }

      if (seen.name == "ncclGroupStart") ++groupDepth;
      if (seen.name == "ncclGroupEnd") --groupDepth;
      if (seen.name == "ncclCommInitRank" || seen.name == "ncclCommInitAll") {
        for (const std::string& made : split(seen.get("made"), ',')) {
          if (made == "0x0") continue;
          CommLife life;
          life.nonblocking = nonblocking && seen.name == "ncclCommInitRank";
          if (!comms.emplace(made, life).second) problems.add(segment.label, "NCCL made " + made + " twice");
        }
        prefix = segment.label.substr(0, segment.label.find("init"));
      } else if (seen.name == "ncclCommDestroy") {
        const auto comm = comms.find(seen.get("comm"));
        if (comm == comms.end() || !comm->second.live) problems.add(segment.label, "destroyed a communicator not alive");
        else comm->second.live = false;
      } else if (seen.name == "ncclAllReduce") {
        ++allReduces;
        const std::string handle = seen.get("comm");
        const auto comm = comms.find(handle);
        const bool live = comm != comms.end() && comm->second.live;
        const bool stale = comm != comms.end() && !comm->second.live;
        if (handle != "0x0" && comm == comms.end()) problems.add(segment.label, "a communicator NCCL never made");
        // The stand-in saw a stale communicator as stale (dead=1), and nothing else.
        if (seen.has("dead") != stale) problems.add(segment.label, "dead= does not match the communicator: " + seen.raw);
        const std::string normal = live ? "0" : std::to_string(static_cast<int>(ncclInvalidArgument));
        if (seen.get("result") != (forced.empty() ? normal : forced)) problems.add(segment.label, "NCCL returned " + seen.raw);
        if (live) ++comm->second.allReduces;
        coverage.note(seen, stale, groupDepth > 0);
      }
    }
    for (const std::string& kind : coverage.missing()) problems.add("thread " + tid, "no all-reduce with " + kind);
    if (groupDepth != 0) problems.add("thread " + tid, "groups left open");
    if (allReduces != static_cast<std::size_t>(fuzz.count)) {
      problems.add("thread " + tid, std::to_string(allReduces) + " all-reduces reached NCCL");
    }
    const auto summary = outputs.find(prefix + "fuzz");
    if (summary == outputs.end() || summary->second.get("allreduces") != std::to_string(fuzz.count)) {
      problems.add("thread " + tid, "the driver's count of all-reduces is missing or wrong");
    }
  }
  // Every step the driver made was marked in the log (and checked above).
  std::size_t printed = 0;
  for (const auto& [label, output] : outputs) printed += output.has("result") ? 1 : 0;
  if (printed != steps) problems.add("run", std::to_string(printed) + " steps printed, " + std::to_string(steps) + " in the log");

  // Each communicator's counters at destroy: every all-reduce forwarded while it was alive,
  // each for its ineligibility (or, for a nonblocking one first used inside a group, not
  // ready yet); stale uses counted nowhere. A nonblocking communicator destroyed before
  // its first all-reduce was never set up: it says nothing.
  const std::string taken = "taken 1shot=0 2shot=0 1stage=0 2stage=0 (0 bytes) forwarded ";
  for (const auto& [handle, life] : comms) {
    const std::vector<std::string> released = infoAbout(run.err, handle, "released:");
    const std::string count = std::to_string(life.allReduces);
    if (life.live) problems.add("comm " + handle, "never destroyed");
    if (life.nonblocking && life.allReduces == 0) {
      if (!released.empty()) problems.add("comm " + handle, "released: " + released[0]);
      continue;
    }
    if (released.size() != 1) {
      problems.add("comm " + handle, std::to_string(released.size()) + " released: lines for " + count + " all-reduces");
      continue;
    }
    bool exact = released[0] == taken + count + (life.allReduces == 0 ? "" : " (ineligible-comm=" + count + ")");
    if (!exact && life.nonblocking) {
      // "(ineligible-comm=a not-ready=b)" with a + b == count, in either order or alone.
      std::size_t sum = 0;
      bool known = released[0].rfind(taken + count + " (", 0) == 0 && released[0].back() == ')';
      const std::string reasons = known ? released[0].substr(taken.size() + count.size() + 2) : "";
      for (const std::string& reason : split(reasons.substr(0, reasons.empty() ? 0 : reasons.size() - 1), ' ')) {
        const std::size_t equals = reason.find('=');
        const std::string name = reason.substr(0, equals);
        known = known && equals != std::string::npos && (name == "ineligible-comm" || name == "not-ready");
        if (known) sum += std::stoull(reason.substr(equals + 1));
      }
      exact = known && sum == life.allReduces;
    }
    if (!exact) problems.add("comm " + handle, "released: " + released[0] + " after " + count + " all-reduces");
  }
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
