// Every reason to forward an all-reduce forwards it: the call reaches NCCL once, unchanged,
// and the caller gets NCCL's result. Here no communicator is eligible (no GPU, or 1 rank),
// so the summary at destroy counts every all-reduce as ineligible-comm.
#include <catch2/catch.hpp>

#include "call_checks.h"

using namespace shimtest;

TEST_CASE("allreduce: every op, type, size and alignment is forwarded unchanged", "[shim][allreduce]") {
  const std::string kind = GENERATE(as<std::string>{}, "rank1", "initall");
  const std::vector<std::string> settings = GENERATE(as<std::vector<std::string>>{},
      std::vector<std::string>{}, std::vector<std::string>{"NCCL_CAR_MAX_BYTES=4096"},
      std::vector<std::string>{"NCCL_CAR_MAX_BYTES=16"},
      std::vector<std::string>{"NCCL_CAR_ALGO=2stage", "NCCL_CAR_MAX_BLOCKS=1"});
  std::vector<std::string> env = settings;
  env.push_back("NCCL_CAR_DEBUG=INFO");
  INFO("communicator " << kind << ", settings " << (settings.empty() ? "none" : settings[0]));

  const ChildResult run = runDriver({"allreduce-matrix", kind}, env);
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {"init"});

  // The matrix is complete: every op and type value, in range or not.
  std::set<std::string> labels;
  for (const Segment& segment : segments) labels.insert(segment.label);
  for (const char* op : {"1", "2", "3", "4", "5", "6", "127", "2147483647", "-1", "-2147483648"}) {
    CHECK(labels.count(std::string("ar.op.") + op) == 1);
  }
  for (int type = 0; type < 12; ++type) CHECK(labels.count("ar.type." + std::to_string(type)) == 1);
  for (const char* type : {"12", "99", "-1", "2147483647"}) CHECK(labels.count(std::string("ar.type.") + type) == 1);

  const Outputs outputs = parseOutputs(run.out);
  const std::string count = outputs.at("matrix").get("allreduces");
  std::size_t allReduces = 0;
  for (const Segment& segment : segments) allReduces += segment.expected.name == "ncclAllReduce" ? 1 : 0;
  REQUIRE(count == std::to_string(allReduces));

  const std::vector<std::string> comms = madeComms(outputs, "init");
  REQUIRE(comms.size() == (kind == "initall" ? 2u : 1u));
  const std::string prefix = "taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded ";
  CHECK(infoAbout(run.err, comms[0], "released:") ==
        std::vector<std::string>{prefix + count + " (ineligible-comm=" + count + ")"});
  if (kind == "initall") CHECK(infoAbout(run.err, comms[1], "released:") == std::vector<std::string>{prefix + "0"});
  for (const std::string& comm : comms) {
    const std::string reasons = onlyInfo(run.err, comm, "setup: not eligible:");
    CHECK_FALSE(reasons.empty());
  }
  if (kind == "rank1") CHECK(carLines(run.err, "WARN").empty());
}

// NCCL_CAR_DETERMINISTIC promises invariance for the calls taken: every call that goes to NCCL
// instead is said, once per communicator and reason. Here every call of the matrix is
// forwarded (ineligible-comm): the 2-rank communicator that makes calls says it once; a 1-rank
// communicator's all-reduce is a copy, invariant anywhere, and says nothing.
TEST_CASE("allreduce: NCCL_CAR_DETERMINISTIC WARNs once per communicator that NCCL promises no invariance",
          "[shim][allreduce][invariance]") {
  const std::string kind = GENERATE(as<std::string>{}, "rank1", "initall");
  INFO("communicator " << kind);
  const ChildResult run = runDriver({"allreduce-matrix", kind}, {"NCCL_CAR_DETERMINISTIC=1"});
  const std::vector<Segment> segments = checkSteps(run);  // still forwarded unchanged
  checkSetupPlacement(segments, {"init"});
  const std::vector<std::string> comms = madeComms(parseOutputs(run.out), "init");
  REQUIRE(!comms.empty());
  INFO(run.err);
  const std::vector<std::string> warnings = linesWith(run.err, {"NCCL-CAR WARN", "NCCL_CAR_DETERMINISTIC"});
  if (kind == "rank1") {
    CHECK(carLines(run.err, "WARN").empty());
  } else {
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("comm " + comms[0] + " rank 0/2") != std::string::npos);
    CHECK(warnings[0].find("as ineligible-comm (first: all-reduce 1024 x fp32 sum)") != std::string::npos);
    CHECK(warnings[0].find("NCCL promises no invariance") != std::string::npos);
  }

  // Switched off entirely, it says so once, at the first call.
  const ChildResult disabled = runDriver({"allreduce-matrix", kind}, {"NCCL_CAR_DETERMINISTIC=1", "NCCL_CAR_DISABLE=1"});
  checkSteps(disabled);
  INFO(disabled.err);
  CHECK(linesWith(disabled.err, {"NCCL-CAR WARN", "NCCL_CAR_DETERMINISTIC with NCCL_CAR_DISABLE"}).size() == 1);
  CHECK(carLines(disabled.err, "WARN").size() == 1);
}
