#include "log_samples.h"

#include <cstring>
#include <string>
#include <vector>

#include "config.h"
#include "log.h"
#include "policy.h"
#include "stats.h"

namespace carquery {
namespace {

using car::LogLevel;

struct Process {
  const char* host;
  long pid;
  long tid;
  int device;
};

// Three processes of a job, two on one host, and the audit module's process.
constexpr Process kFirst{"node-a", 100, 101, 0};
constexpr Process kSecond{"node-a", 200, 201, 1};
constexpr Process kOtherHost{"node-b", 300, 301, 0};
constexpr Process kAudited{"node-c", 400, 400, -1};

class Samples {
 public:
  explicit Samples(JsonWriter& json) : json_(json) { json_.key("samples").beginArray(); }
  ~Samples() { json_.endArray(); }

  // Starts one sample's object: its kind, the whole line and where it comes from. The caller
  // adds the facts the line was made from, then calls end().
  JsonWriter& begin(const char* kind, const Process& process, LogLevel level, const std::string& text,
                    const char* file = "", int line = 0) {
    const std::string start = car::logText(car::formatLineStart, process.host, process.pid, process.tid,
                                           process.device, level, file, line);
    json_.beginObject().key("kind").string(kind).key("line").string(start + text);
    json_.key("host").string(process.host).key("pid").number(static_cast<std::uint64_t>(process.pid));
    return json_.key("level").string(car::logLevelName(level));
  }
  void end() { json_.endObject(); }

 private:
  JsonWriter& json_;
};

std::string commName(std::uintptr_t address, int rank, int ranks) {
  return car::logText(car::formatCommName, reinterpret_cast<const void*>(address), rank, ranks);
}

// A PCIe communicator (!fullNvlink) is eligible where the choice table measured its case, or
// where NCCL_CAR_ALGO forces a push kernel (`forced`, null: tuned).
void setupEligible(Samples& samples, const Process& process, std::uintptr_t comm, int rank, int ranks,
                   bool sameProcess, bool fullNvlink, int computeCapability, const char* forced = nullptr) {
  const std::string links = car::logText(car::formatLinks, fullNvlink, "PXB", 0, ranks * (ranks - 1) / 2);
  const std::string note = fullNvlink ? "" : car::logText(car::formatPcieTuning, ranks, forced == nullptr, forced);
  const std::string text = car::logText(car::formatSetupEligible, commName(comm, rank, ranks).c_str(), sameProcess,
                                        links.c_str(), computeCapability, 8ull << 20, 50337280ull, 0ull, note.c_str());
  JsonWriter& json = samples.begin("setup-eligible", process, LogLevel::Info, text);
  json.key("rank").number(static_cast<std::uint64_t>(rank)).key("ranks").number(static_cast<std::uint64_t>(ranks));
  json.key("links").string(fullNvlink ? "nvlink" : "pcie").key("pcie_tuned");
  if (fullNvlink) json.null();
  else json.boolean(forced == nullptr);
  samples.end();
}

void setupNotEligible(Samples& samples, const Process& process, std::uintptr_t comm, int rank, int ranks,
                      const std::string& reason, const char* links = nullptr) {
  JsonWriter& json = samples.begin("setup-not-eligible", process, LogLevel::Info,
                                   car::logText(car::formatSetupNotEligible, commName(comm, rank, ranks).c_str(),
                                                reason.c_str()));
  json.key("rank").number(static_cast<std::uint64_t>(rank)).key("ranks").number(static_cast<std::uint64_t>(ranks));
  json.key("reason").string(reason).key("links");  // the case it is, where it says (PCIe untuned)
  if (links != nullptr) json.string(links);
  else json.null();
  samples.end();
}

// The counts through CallStats::summary, the library's own writer of them: at a release, or
// at exit for a communicator never destroyed.
void released(Samples& samples, const Process& process, std::uintptr_t comm, int rank, int ranks,
              const car::CallStats& stats, bool atExit = false) {
  const std::string name = commName(comm, rank, ranks);
  const std::string text = atExit ? car::logText(car::formatAliveAtExit, name.c_str(), stats.summary().c_str())
                                  : car::logText(car::formatReleased, name.c_str(), stats.summary().c_str());
  JsonWriter& json = samples.begin(atExit ? "alive-at-exit" : "released", process, LogLevel::Info, text);
  json.key("rank").number(static_cast<std::uint64_t>(rank)).key("ranks").number(static_cast<std::uint64_t>(ranks));
  json.key("taken").beginObject();
  for (int a = 0; a < car::kAlgorithmCount; ++a) {
    const auto algorithm = static_cast<car::Algorithm>(a);
    json.key(car::algorithmName(algorithm)).number(stats.taken(algorithm));
  }
  json.endObject().key("bytes").number(stats.takenBytes());
  json.key("forwarded").beginObject();
  for (int r = 0; r < static_cast<int>(car::ForwardReason::kCount); ++r) {
    const auto reason = static_cast<car::ForwardReason>(r);
    if (stats.forwarded(reason) != 0) json.key(car::forwardReasonName(reason)).number(stats.forwarded(reason));
  }
  json.endObject();
  samples.end();
}

void takenCall(Samples& samples, const Process& process, int rank, car::Algorithm algorithm, car::ElementType type,
               car::ReduceOp op, unsigned long long count) {
  const car::Collective collective = car::collectiveOf(algorithm);
  const char* opName = car::reduces(collective) ? car::reduceOpName(op) : nullptr;
  const std::string text = car::logText(car::formatTakenCall, rank, car::collectiveName(collective), count,
                                        car::elementTypeName(type), opName, count * car::elementBytes(type),
                                        car::algorithmName(algorithm));
  JsonWriter& json = samples.begin("taken-call", process, LogLevel::Trace, text)
                         .key("kernel").string(car::algorithmName(algorithm))
                         .key("collective").string(car::collectiveName(collective))
                         .key("type").string(car::elementTypeName(type))
                         .key("op");
  if (opName != nullptr) json.string(opName);
  else json.null();
  samples.end();
}

// One call of every type, each kernel and op in turn.
void takenCalls(Samples& samples, const Process& process, int rank) {
  for (int t = 0; t < car::kElementTypeCount; ++t) {
    takenCall(samples, process, rank, static_cast<car::Algorithm>(t % car::kAlgorithmCount),
              static_cast<car::ElementType>(t), static_cast<car::ReduceOp>(t % car::kReduceOpCount), 1024ull << t);
  }
}

void warning(Samples& samples, const Process& process, const std::string& text, const char* file, int line) {
  samples.begin("warn", process, LogLevel::Warn, text, file, line)
      .key("file").string(file).key("source_line").number(static_cast<std::uint64_t>(line)).key("text").string(text);
  samples.end();
}

// The lines README.md and docs/ show, with the values of a plausible job: an 8-rank
// communicator of the first process, its calls, and two WARNs. tests/cli/test_log_lines_docs.py
// requires every example line in the docs to be one of these samples (or another above).
void documentedLines(Samples& samples) {
  constexpr std::uintptr_t kComm = 0x7f3a1c002e00;
  setupEligible(samples, kFirst, kComm, 0, 8, false, true, 90);
  takenCall(samples, kFirst, 0, car::Algorithm::OneShotPush, car::ElementType::BFloat16, car::ReduceOp::Sum, 131072);
  takenCall(samples, kFirst, 0, car::Algorithm::AllGatherPush, car::ElementType::BFloat16, car::ReduceOp::Sum, 4096);

  car::CallStats job;
  for (int n = 0; n < 812; ++n) job.countTaken(car::Algorithm::OneShotPush, 256 << 10);
  for (int n = 0; n < 96; ++n) job.countTaken(car::Algorithm::TwoShotPush, 2 << 20);
  for (int n = 0; n < 64; ++n) job.countTaken(car::Algorithm::AllGatherPush, 4096);
  for (int n = 0; n < 64; ++n) job.countTaken(car::Algorithm::ReduceScatterPush, 4096);
  for (int n = 0; n < 40; ++n) job.countForwarded(car::ForwardReason::TooLarge);
  released(samples, kFirst, kComm, 0, 8, job);

  // A refused value, as the library's settings parser words it (the shim logs each problem).
  std::vector<std::string> problems;
  car::parseConfig([](const char* name) { return std::strcmp(name, "NCCL_CAR_MAX_BYTES") == 0 ? "8M" : nullptr; },
                   &problems);
  for (const std::string& problem : problems) warning(samples, kFirst, problem, "shim/exports/shim_config.cc", 35);

  const std::string comm = commName(kComm, 0, 8);
  warning(samples, kFirst,
          car::logText(car::formatInvarianceEnds, comm.c_str(), car::forwardReasonName(car::ForwardReason::TooLarge),
                       car::collectiveName(car::Collective::AllReduce), 4194305ull,
                       car::elementTypeName(car::ElementType::BFloat16), car::reduceOpName(car::ReduceOp::Sum)),
          "shim/exports/hooks.cc", 130);
}

}  // namespace

void writeLogSamples(JsonWriter& json) {
  json.beginObject();
  {
    Samples samples(json);
    samples.begin("real-nccl-found", kFirst, LogLevel::Info,
                  car::logText(car::formatRealNcclFound, "the next library (RTLD_NEXT)", "2.32.3"));
    samples.end();
    setupEligible(samples, kFirst, 0x55d0c0a0, 0, 2, false, true, 90);
    setupEligible(samples, kSecond, 0x7f00aa00, 1, 2, true, false, 0);
    // Over PCIe, nothing measured: not eligible, with the links it found (a PCIe case all the same).
    const std::string pcieLinks = car::logText(car::formatLinks, false, "PXB", 0, 6);
    setupNotEligible(samples, kSecond, 0x7f00bb00, 1, 4,
                     car::logText(car::formatPcieUntuned, true, pcieLinks.c_str(), 89, 4), "pcie");
    // Over PCIe, nothing measured but NCCL_CAR_ALGO forces a push kernel (how nccl-car tune times it).
    setupEligible(samples, kSecond, 0x7f00dd00, 1, 2, true, false, 89, "1shot");

    setupNotEligible(samples, kOtherHost, 0x1234, 1, 4, "ranks span 2 hosts");

    warning(samples, kOtherHost, commName(0x1234, 1, 4) + ": NCCL_CAR_ALGO differs between rank 0 and rank 1",
            "shim/handshake/handshake.cc", 99);

    takenCalls(samples, kFirst, 0);

    car::CallStats every;  // every kernel and every reason, each a different number of times
    for (int a = 0; a < car::kAlgorithmCount; ++a) {
      for (int n = 0; n <= a; ++n) every.countTaken(static_cast<car::Algorithm>(a), 4096u << a);
    }
    for (int r = 0; r < static_cast<int>(car::ForwardReason::kCount); ++r) {
      for (int n = 0; n <= r; ++n) every.countForwarded(static_cast<car::ForwardReason>(r));
    }
    released(samples, kFirst, 0x55d0c0a0, 0, 2, every);

    car::CallStats nothingForwarded;
    for (int n = 0; n < 3; ++n) nothingForwarded.countTaken(car::Algorithm::TwoShotPush, 1 << 20);
    released(samples, kSecond, 0x7f00aa00, 1, 2, nothingForwarded);

    car::CallStats allForwarded;
    for (int n = 0; n < 20; ++n) allForwarded.countForwarded(car::ForwardReason::NotEligible);
    released(samples, kOtherHost, 0x1234, 1, 4, allForwarded);

    car::CallStats untuned;  // over PCIe before nccl-car tune measured it
    for (int n = 0; n < 7; ++n) untuned.countForwarded(car::ForwardReason::Untuned);
    released(samples, kSecond, 0x7f00bb00, 1, 4, untuned);
    car::CallStats forced;  // NCCL_CAR_ALGO=1shot over PCIe, unmeasured: what it cannot run goes to NCCL
    for (int n = 0; n < 5; ++n) forced.countTaken(car::Algorithm::OneShotPush, 4096);
    for (int n = 0; n < 2; ++n) forced.countForwarded(car::ForwardReason::Untuned);
    released(samples, kSecond, 0x7f00dd00, 1, 2, forced);
    // A communicator never destroyed (JAX's), counted at exit.
    setupEligible(samples, kSecond, 0x7f00cc00, 1, 2, true, true, 90);
    car::CallStats neverDestroyed;
    for (int n = 0; n < 7; ++n) neverDestroyed.countTaken(car::Algorithm::OneShotPush, 2048);
    neverDestroyed.countForwarded(car::ForwardReason::TooLarge);
    released(samples, kSecond, 0x7f00cc00, 1, 2, neverDestroyed, true);

    const char* nccl = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
    samples.begin("audit-served", kAudited, LogLevel::Info,
                  car::kAuditTag + car::logText(car::formatAuditServed, nccl, "/opt/nccl-car/libnccl-car.so", nccl));
    samples.end();

    documentedLines(samples);
  }
  json.endObject();
}

}  // namespace carquery
