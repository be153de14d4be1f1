#include "nccl_bench_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bench {
namespace {

constexpr const char* kUsage =
    "usage: car_nccl_bench [--ranks N] [--one-gpu] [--collective NAME] [--type NAME] [--op NAME]\n"
    "                      [--sizes LIST | --min-bytes B --max-bytes B] [--modes LIST] [--workloads LIST]\n"
    "                      [--layers N] [--gemm MxNxK] [--calls N] [--samples N] [--large-bytes B]\n"
    "                      [--symmetric] [--probe] [--first-all-gather B] [--set-up-another-first]\n"
    "                      [--nccl-barrier] [--floor] [--paired-direct]\n"
    "  --ranks N      ranks, one process each (default: one per visible GPU; --gpus N is the same)\n"
    "  --one-gpu      every rank on GPU 0, for the one-GPU rig: run it under MPS\n"
    "  --collective   all-reduce, all-gather, reduce-scatter (default all-reduce)\n"
    "  --type         int8 uint8 int32 uint32 int64 uint64 fp16 bf16 fp32 fp64 fp8e4m3 fp8e5m2 (default bf16);\n"
    "                 nccl-tests' names too: half bfloat16 float double f8e4m3 f8e5m2 (fp8 needs sm_90)\n"
    "  --op           sum prod min max avg (default sum; all-gather has none)\n"
    "  --sizes        bytes of the whole message, comma-separated (1K, 3000, 2M, ...); else doubling\n"
    "                 from --min-bytes to --max-bytes (default 1K, 8M); each rounded down to whole\n"
    "                 elements (all-gather, reduce-scatter: per rank), under one: skipped\n"
    "  --modes        model, isolated, chain (default model,isolated)\n"
    "  --workloads    plain, in-place, two-streams, after-large (default plain)\n"
    "  --layers N     model: layers per step, even (default 4)\n"
    "  --gemm MxNxK   model: each layer's bf16 GEMM (default 16x4096x4096)\n"
    "  --calls N      isolated, chain: calls per sample (default 20)\n"
    "  --samples N    timed samples per row (default 15)\n"
    "  --large-bytes  after-large: the call before each timed one (default 8M)\n"
    "  --symmetric    buffers registered as NCCL symmetric windows (nccl-tests -R 2)\n"
    "  --probe        one checked call per size, nothing timed\n"
    "  --first-all-gather B  first, an all-gather of B bytes per rank on a stream of its own (as the\n"
    "                 library's set-up exchanges its records): what that leaves in NCCL\n"
    "  --set-up-another-first  first, another communicator of the same ranks and 50 checked 4 KiB\n"
    "                 all-reduces on it, kept to the end; the one timed is split from it\n"
    "  --nccl-barrier the bench's own barrier and reductions through pncclAllReduce (never hooked)\n"
    "  --floor        isolated: also the row floor, our kernel's launch and event record alone in\n"
    "                 place of each call, timed as the host row times a call (nothing to check)\n"
    "  --paired-direct isolated: also the rows paired-hook and paired-direct, each call through the\n"
    "                 hook and through NCCL's own pnccl* entry point, sample by sample in turn\n";

[[noreturn]] void usage(const std::string& problem) {
  if (!problem.empty()) std::fprintf(stderr, "car_nccl_bench: %s\n", problem.c_str());
  std::fputs(kUsage, problem.empty() ? stdout : stderr);
  std::exit(problem.empty() ? 0 : 2);
}

std::size_t parseBytes(const std::string& text, const char* option) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (*end == 'K' || *end == 'k') value *= 1024, ++end;
  else if (*end == 'M' || *end == 'm') value *= 1024 * 1024, ++end;
  else if (*end == 'G' || *end == 'g') value *= 1024.0 * 1024 * 1024, ++end;
  if (end == text.c_str() || *end != '\0' || !(value >= 1)) usage(std::string(option) + ": not a size: '" + text + "'");
  return static_cast<std::size_t>(value);
}

int parseCount(const std::string& text, const char* option, int lowest, int highest) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value < lowest || value > highest) {
    usage(std::string(option) + ": expected " + std::to_string(lowest) + " to " + std::to_string(highest) + ", got '" +
          text + "'");
  }
  return static_cast<int>(value);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    words.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return words;
}

template <typename Value, std::size_t N>
std::vector<Value> namedList(const std::string& text, const char* option, const Value (&all)[N],
                             const char* (*nameOf)(Value)) {
  std::vector<Value> chosen;
  for (const std::string& word : split(text)) {
    const Value* found = std::find_if(std::begin(all), std::end(all), [&](Value v) { return word == nameOf(v); });
    if (found == std::end(all)) usage(std::string(option) + ": unknown '" + word + "'");
    if (std::find(chosen.begin(), chosen.end(), *found) == chosen.end()) chosen.push_back(*found);
  }
  return chosen;
}

const TypeInfo* typeNamed(const std::string& name) {
  for (const TypeInfo& type : kTypes)
    if (name == type.name || name == type.testsName) return &type;
  usage("--type: unknown type '" + name + "'");
}

const OpInfo* opNamed(const std::string& name) {
  for (const OpInfo& op : kOps)
    if (name == op.name) return &op;
  usage("--op: unknown op '" + name + "'");
}

Gemm parseGemm(const std::string& text) {
  Gemm gemm;
  if (std::sscanf(text.c_str(), "%dx%dx%d", &gemm.m, &gemm.n, &gemm.k) != 3 || gemm.m < 1 || gemm.n < 1 || gemm.k < 1) {
    usage("--gemm: expected MxNxK, got '" + text + "'");
  }
  return gemm;
}

constexpr Collective kCollectives[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter};
constexpr Mode kModes[] = {Mode::Model, Mode::Isolated, Mode::Chain};
constexpr Workload kWorkloads[] = {Workload::Plain, Workload::InPlace, Workload::TwoStreams, Workload::AfterLarge};

}  // namespace

const char* collectiveName(Collective collective) {
  switch (collective) {
    case Collective::AllReduce: return "all-reduce";
    case Collective::AllGather: return "all-gather";
    case Collective::ReduceScatter: return "reduce-scatter";
  }
  return "?";
}

const char* modeName(Mode mode) {
  switch (mode) {
    case Mode::Model: return "model";
    case Mode::Isolated: return "isolated";
    case Mode::Chain: return "chain";
  }
  return "?";
}

const char* workloadName(Workload workload) {
  switch (workload) {
    case Workload::Plain: return "plain";
    case Workload::InPlace: return "in-place";
    case Workload::TwoStreams: return "two-streams";
    case Workload::AfterLarge: return "after-large";
  }
  return "?";
}

Options parseOptions(int argc, char** argv) {
  Options options;
  std::size_t minBytes = 1 << 10, maxBytes = 8 << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") usage("");
    if (arg == "--one-gpu") { options.oneGpu = true; continue; }
    if (arg == "--symmetric") { options.symmetric = true; continue; }
    if (arg == "--probe") { options.probe = true; continue; }
    if (arg == "--floor") { options.floor = true; continue; }
    if (arg == "--set-up-another-first") { options.setUpAnotherFirst = true; continue; }
    if (arg == "--nccl-barrier") { options.ncclBarrier = true; continue; }
    if (arg == "--paired-direct") { options.pairedDirect = true; continue; }
    if (i + 1 >= argc) usage("unknown option or missing value: " + arg);
    const std::string value = argv[++i];
    if (arg == "--ranks" || arg == "--gpus") options.ranks = parseCount(value, arg.c_str(), 2, 64);
    else if (arg == "--collective") {
      const std::vector<Collective> chosen = namedList(value, "--collective", kCollectives, collectiveName);
      if (chosen.size() != 1) usage("--collective: one collective per run, not '" + value + "'");
      options.collective = chosen.front();
    }
    else if (arg == "--type") options.type = typeNamed(value);
    else if (arg == "--op") options.op = opNamed(value);
    else if (arg == "--sizes") {
      options.sizes.clear();
      for (const std::string& word : split(value)) options.sizes.push_back(parseBytes(word, "--sizes"));
    }
    else if (arg == "--min-bytes") minBytes = parseBytes(value, "--min-bytes");
    else if (arg == "--max-bytes") maxBytes = parseBytes(value, "--max-bytes");
    else if (arg == "--modes") options.modes = namedList(value, "--modes", kModes, modeName);
    else if (arg == "--workloads") options.workloads = namedList(value, "--workloads", kWorkloads, workloadName);
    else if (arg == "--layers") options.layers = parseCount(value, "--layers", 2, 64);
    else if (arg == "--gemm") options.gemm = parseGemm(value);
    else if (arg == "--calls") options.calls = parseCount(value, "--calls", 1, 1000);
    else if (arg == "--samples") options.samples = parseCount(value, "--samples", 1, 100);
    else if (arg == "--large-bytes") options.largeBytes = parseBytes(value, "--large-bytes");
    else if (arg == "--first-all-gather") options.firstAllGatherBytes = parseBytes(value, "--first-all-gather");
    else usage("unknown option: " + arg);
  }
  if (options.layers % 2 != 0) usage("--layers: must be even (the layers take turns with two buffers)");
  if (options.sizes.empty()) {
    if (minBytes > maxBytes) usage("--min-bytes is above --max-bytes");
    for (std::size_t size = minBytes; size <= maxBytes; size *= 2) options.sizes.push_back(size);
  }
  return options;
}

}  // namespace bench
