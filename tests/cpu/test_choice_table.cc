// The choice table (plugin/choice_table.h): its parser refuses anything it cannot follow with
// one reason, a table of another machine included; the policy follows a table where a row
// applies and the caller asked for no kernel; ranks that loaded different tables differ in
// their shared settings, naming NCCL_CAR_TABLE.
#include <catch2/catch.hpp>

#include <string>

#include "call_facts.h"
#include "choice_table.h"
#include "config.h"
#include "policy.h"

using namespace car;
using car::testing::callOf;
using car::testing::sumOf;

namespace {

constexpr std::uint64_t kFingerprint = 0x0123456789abcdefull;

std::string tableText(const std::string& rows, std::uint64_t fingerprint = kFingerprint) {
  return "nccl-car choice table 2\nfingerprint " + hex64(fingerprint) + "\nmachine a test machine\n# a comment\n\n" +
         rows;
}

ChoiceTable parsed(const std::string& rows) {
  std::string why;
  std::optional<ChoiceTable> table = ChoiceTable::parse(tableText(rows), kFingerprint, &why);
  INFO(why);
  REQUIRE(table.has_value());
  return *table;
}

std::string refusal(const std::string& text) {
  std::string why;
  CHECK_FALSE(ChoiceTable::parse(text, kFingerprint, &why).has_value());
  CHECK_FALSE(why.empty());
  return why;
}

Config withTable(const std::string& rows) {
  Config config;
  config.table = std::make_shared<const ChoiceTable>(parsed(rows));
  config.tableDigest = config.table->digest();
  return config;
}

}  // namespace

TEST_CASE("choice table: rows are found by collective, ranks, type family and the whole message's size",
          "[choice-table]") {
  const ChoiceTable table = parsed(
      "all-reduce 2 nvlink half 1 4096 2shot\n"
      "all-reduce 2 nvlink half 4097 65536 nccl\n"
      "all-reduce 8 nvlink split 1 1024 1shot\n"
      "all-gather 2 nvlink any 1 1048576 nccl\n"
      "reduce-scatter 4 nvlink float 1 2048 reducescatter\n");
  REQUIRE(table.rows().size() == 5);
  CHECK(table.find(Collective::AllReduce, 2, Links::NvLink, ElementType::BFloat16, 4096)->kernel == Algorithm::TwoShotPush);
  CHECK(table.find(Collective::AllReduce, 2, Links::NvLink, ElementType::Float16, 1)->kernel == Algorithm::TwoShotPush);
  CHECK_FALSE(table.find(Collective::AllReduce, 2, Links::NvLink, ElementType::Float16, 4097)->kernel.has_value());
  CHECK(table.find(Collective::AllReduce, 2, Links::NvLink, ElementType::Float16, 65537) == nullptr);
  CHECK(table.find(Collective::AllReduce, 2, Links::NvLink, ElementType::Float32, 16) == nullptr);  // another family
  CHECK(table.find(Collective::AllReduce, 3, Links::NvLink, ElementType::BFloat16, 16) == nullptr);  // another world size
  CHECK(table.find(Collective::AllReduce, 2, Links::Pcie, ElementType::BFloat16, 16) == nullptr);  // another case
  for (ElementType type : {ElementType::Int8, ElementType::UInt64, ElementType::Float64}) {
    CHECK(table.find(Collective::AllReduce, 8, Links::NvLink, type, 1024)->kernel == Algorithm::OneShotPush);
  }
  for (int t = 0; t < kElementTypeCount; ++t) {  // `any`
    CHECK(table.find(Collective::AllGather, 2, Links::NvLink, static_cast<ElementType>(t), 1024) != nullptr);
  }
  CHECK(table.find(Collective::ReduceScatter, 4, Links::NvLink, ElementType::Float32, 2048)->kernel == Algorithm::ReduceScatterPush);
  CHECK(table.find(Collective::ReduceScatter, 4, Links::NvLink, ElementType::Float8E4M3, 2048) == nullptr);
  CHECK(typeFamilyOf(ElementType::Float8E5M2) == TypeFamily::Fp8);
  CHECK(typeFamilyOf(ElementType::UInt32) == TypeFamily::Split);
}

TEST_CASE("choice table: a table that cannot be followed is refused with its reason", "[choice-table]") {
  CHECK(refusal("") .find("not a choice table") != std::string::npos);
  CHECK(refusal("nccl-car choice table 3\n").find("not a choice table") != std::string::npos);
  // Format 1 had no links column: its rows cannot say which case they were measured for.
  CHECK(refusal("nccl-car choice table 1\nfingerprint " + hex64(kFingerprint) + "\n").find("run nccl-car tune again") !=
        std::string::npos);
  // Of another machine (or driver, CUDA, NCCL, library): the fingerprint differs.
  CHECK(refusal(tableText("", 0x1111111111111111ull)).find("run nccl-car tune again") != std::string::npos);
  CHECK(refusal("nccl-car choice table 2\nall-reduce 2 nvlink half 1 2 1shot\n").find("no fingerprint") !=
        std::string::npos);
  CHECK(refusal("nccl-car choice table 2\nfingerprint 12345\n").find("16 hexadecimal") != std::string::npos);
  for (const char* row : {"broadcast 2 nvlink half 1 2 1shot",          // no such collective
                          "all-reduce 1 nvlink half 1 2 1shot",         // ranks
                          "all-reduce 9 nvlink half 1 2 1shot",
                          "all-reduce 2 nvlink double 1 2 1shot",       // family
                          "all-reduce 2 nvlink half 9 2 1shot",         // from > to
                          "all-reduce 2 nvlink half 1 2 fastest",       // no such kernel
                          "all-reduce 2 nvlink half 1 2 allgather",     // a kernel of another collective
                          "all-gather 2 nvlink any 1 2 1shot",
                          "all-reduce 2 nvlink half 1 2",               // too few words
                          "all-reduce 2 nvlink half 1 2 1shot extra",   // too many
                          "all-reduce 2 nvlink half -1 2 1shot",
                          "all-reduce 2 half 1 2 1shot",          // no links (format 1's row)
                          "all-reduce 2 pci half 1 2 1shot",      // links
                          "all-reduce 2 pcie half 1 2 1stage",    // a pull kernel over PCIe
                          "all-reduce 2 pcie half 1 2 2stage"}) {
    INFO(row);
    const std::string why = refusal(tableText(std::string(row) + "\n"));
    CHECK(why.rfind("line 6: ", 0) == 0);
  }
  // Overlapping rows: one size would have two winners.
  CHECK(refusal(tableText("all-reduce 2 nvlink half 1 100 1shot\nall-reduce 2 nvlink half 100 200 2shot\n")).find("overlaps") !=
        std::string::npos);
  CHECK(refusal(tableText("all-gather 2 nvlink any 1 100 nccl\nall-gather 2 nvlink half 50 60 allgather\n")).find("overlaps") !=
        std::string::npos);
  // Rows of different world sizes or families do not overlap.
  parsed("all-reduce 2 nvlink half 1 100 1shot\nall-reduce 4 nvlink half 1 100 2shot\nall-reduce 2 nvlink float 1 100 2shot\n");
  // Nor do rows of the two cases: one machine may have both (NVLink pairs, PCIe between them).
  parsed("all-reduce 2 nvlink half 1 100 1stage\nall-reduce 2 pcie half 1 100 2shot\n");
}

TEST_CASE("choice table: the digest changes with the file; the default path follows the cache folder",
          "[choice-table]") {
  CHECK(parsed("all-reduce 2 nvlink half 1 2 1shot\n").digest() != parsed("all-reduce 2 nvlink half 1 3 1shot\n").digest());
  CHECK(fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(hex64(0xabcull) == "0000000000000abc");
  CHECK(defaultTablePath(kFingerprint, [](const char* name) -> const char* {
          return std::string(name) == "XDG_CACHE_HOME" ? "/cache" : "/home/u";
        }) == "/cache/nccl-car/0123456789abcdef.table");
  CHECK(defaultTablePath(kFingerprint, [](const char* name) -> const char* {
          return std::string(name) == "HOME" ? "/home/u" : nullptr;
        }) == "/home/u/.cache/nccl-car/0123456789abcdef.table");
  CHECK(defaultTablePath(kFingerprint, [](const char*) -> const char* { return "relative"; }).empty());
}

TEST_CASE("choice table: the policy follows its rows where the caller asks for no kernel", "[choice-table][policy]") {
  const CommunicatorFacts two{2, true, 90};
  const Config config = withTable(
      "all-reduce 2 nvlink half 1 4096 2shot\n"
      "all-reduce 2 nvlink half 4097 65536 nccl\n"
      "all-reduce 2 nvlink split 1 65536 nccl\n"
      "all-gather 2 nvlink any 1 8192 nccl\n"
      "reduce-scatter 2 nvlink any 1 8192 reducescatter\n");
  // Built in: 1shot up to 2 MiB at 2 ranks; the table says 2shot, then NCCL.
  CHECK(planCall(two, sumOf(ElementType::BFloat16, 2048), Config{}).algorithm == Algorithm::OneShotPush);
  CHECK(planCall(two, sumOf(ElementType::BFloat16, 2048), config).algorithm == Algorithm::TwoShotPush);
  const CallPlan tuned = planCall(two, sumOf(ElementType::BFloat16, 4096), config);
  CHECK_FALSE(tuned.ours);
  CHECK(tuned.reason == ForwardReason::Tuned);
  CHECK(std::string(forwardReasonName(ForwardReason::Tuned)) == "tuned");
  // Past the rows: the built-in rule.
  CHECK(planCall(two, sumOf(ElementType::BFloat16, 65536), config).algorithm == Algorithm::OneShotPush);
  // The all-gather's limit is on the whole message: 2 parts of 4096 bytes is 8192.
  CHECK(planCall(two, callOf(Collective::AllGather, ElementType::Float32, 1024), config).reason ==
        ForwardReason::Tuned);
  CHECK(planCall(two, callOf(Collective::AllGather, ElementType::Float32, 1025), config).ours);
  CHECK(planCall(two, callOf(Collective::ReduceScatter, ElementType::Float32, 1024), config).ours);
  // The caller's own choice wins: NCCL_CAR_ALGO (all-reduce), or a per-call option.
  Config forced = config;
  forced.algorithm = Algorithm::OneShotPush;
  CHECK(planCall(two, sumOf(ElementType::BFloat16, 4096), forced).algorithm == Algorithm::OneShotPush);
  CallFacts asked = sumOf(ElementType::BFloat16, 4096);
  asked.requestedAlgorithm = Algorithm::OneShotPush;
  CHECK(planCall(two, asked, config).algorithm == Algorithm::OneShotPush);
  // NCCL_CAR_DETERMINISTIC keeps ours what the table gives NCCL for speed, but integers (exact
  // on NCCL too) and all-gathers (copies) may go.
  Config deterministic = config;
  deterministic.deterministic = true;
  CHECK(planCall(two, sumOf(ElementType::BFloat16, 4096), deterministic).ours);
  CHECK(planCall(two, sumOf(ElementType::Int32, 16), deterministic).reason == ForwardReason::Tuned);
  CHECK(planCall(two, callOf(Collective::AllGather, ElementType::Float32, 16), deterministic).reason ==
        ForwardReason::Tuned);
  // A winner that cannot run the call (too large for its area here) leaves the built-in rule.
  Config small = withTable("all-reduce 4 nvlink half 1 8388608 1shot\n");
  small.pushMaxBytes = 64 * 1024;
  const CommunicatorFacts four{4, true, 90};
  CHECK(planCall(four, sumOf(ElementType::BFloat16, 4096), small).algorithm == Algorithm::OneShotPush);
  CHECK(planCall(four, sumOf(ElementType::BFloat16, 20000), small).algorithm == Algorithm::TwoShotPush);
}

TEST_CASE("choice table: ranks that follow different tables differ in NCCL_CAR_TABLE", "[choice-table][settings]") {
  const Config one = withTable("all-reduce 2 nvlink half 1 2 1shot\n");
  const Config other = withTable("all-reduce 2 nvlink half 1 3 1shot\n");
  CHECK(firstDifferingVariable(sharedSettingsOf(one), sharedSettingsOf(one)) == nullptr);
  CHECK(std::string(firstDifferingVariable(sharedSettingsOf(one), sharedSettingsOf(other))) == "NCCL_CAR_TABLE");
  CHECK(std::string(firstDifferingVariable(sharedSettingsOf(one), sharedSettingsOf(Config{}))) == "NCCL_CAR_TABLE");
}

TEST_CASE("choice table: a PCIe communicator takes exactly what the PCIe rows of its world size give ours",
          "[choice-table][policy][pcie]") {
  const CommunicatorFacts pcie{4, false, 89};
  const Config config = withTable(
      "all-reduce 4 pcie half 1 4096 1shot\n"
      "all-reduce 4 pcie half 4097 65536 2shot\n"
      "all-reduce 4 pcie half 65537 1048576 nccl\n"
      "all-reduce 4 nvlink float 1 65536 1shot\n"           // the NVLink case: not this communicator's
      "all-gather 4 pcie any 1 16384 allgather\n"
      "reduce-scatter 2 pcie any 1 16384 reducescatter\n");  // another world size
  CHECK(planCall(pcie, sumOf(ElementType::BFloat16, 2048), config).algorithm == Algorithm::OneShotPush);
  CHECK(planCall(pcie, sumOf(ElementType::Float16, 2049), config).algorithm == Algorithm::TwoShotPush);
  CHECK(planCall(pcie, sumOf(ElementType::BFloat16, 32768), config).algorithm == Algorithm::TwoShotPush);
  CHECK(planCall(pcie, sumOf(ElementType::BFloat16, 32769), config).reason == ForwardReason::Tuned);
  // Where no row says: NCCL, untuned (not the built-in rule).
  CHECK(planCall(pcie, sumOf(ElementType::BFloat16, 1048576), config).reason == ForwardReason::Untuned);
  CHECK(planCall(pcie, sumOf(ElementType::Float32, 16), config).reason == ForwardReason::Untuned);
  CHECK(planCall(pcie, sumOf(ElementType::Int32, 16), config).reason == ForwardReason::Untuned);
  CHECK(planCall({2, false, 89}, sumOf(ElementType::BFloat16, 16), config).reason == ForwardReason::Untuned);
  // The movers likewise: 4 parts of 4096 bytes is the row's 16384.
  CHECK(planCall(pcie, callOf(Collective::AllGather, ElementType::Float32, 1024), config).algorithm ==
        Algorithm::AllGatherPush);
  CHECK(planCall(pcie, callOf(Collective::AllGather, ElementType::Float32, 1025), config).reason ==
        ForwardReason::Untuned);
  CHECK(planCall(pcie, callOf(Collective::ReduceScatter, ElementType::Float32, 16), config).reason ==
        ForwardReason::Untuned);
  // NCCL_CAR_DETERMINISTIC cannot keep ours what a PCIe row gives NCCL: there is no built-in
  // choice to keep it on.
  Config deterministic = config;
  deterministic.deterministic = true;
  CHECK(planCall(pcie, sumOf(ElementType::BFloat16, 32769), deterministic).reason == ForwardReason::Tuned);
  // The NVLink communicator of the same size follows its own rows and the built-in rule.
  const CommunicatorFacts nvlink{4, true, 89};
  CHECK(planCall(nvlink, sumOf(ElementType::BFloat16, 32769), config).algorithm == Algorithm::OneShotPush);
  CHECK(planCall(nvlink, sumOf(ElementType::Float32, 16), config).algorithm == Algorithm::OneShotPush);
  // A row's kernel that cannot run the call here (its area is smaller under these settings):
  // no built-in choice to fall back on over PCIe.
  Config small = withTable("all-reduce 4 pcie half 1 8388608 1shot\n");
  small.pushMaxBytes = 64 * 1024;
  CHECK(planCall(pcie, sumOf(ElementType::BFloat16, 4096), small).algorithm == Algorithm::OneShotPush);
  CHECK(planCall(pcie, sumOf(ElementType::BFloat16, 20000), small).reason == ForwardReason::Untuned);
  // The table says whether it measured a case, for the setup: line.
  CHECK(config.table->measured(4, Links::Pcie));
  CHECK(config.table->measured(2, Links::Pcie));
  CHECK(config.table->measured(4, Links::NvLink));
  CHECK_FALSE(config.table->measured(8, Links::Pcie));
  CHECK_FALSE(config.table->measured(2, Links::NvLink));
}
