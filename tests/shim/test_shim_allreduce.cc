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
  const std::string prefix = "taken 1shot=0 2shot=0 1stage=0 2stage=0 (0 bytes) forwarded ";
  CHECK(infoAbout(run.err, comms[0], "released:") ==
        std::vector<std::string>{prefix + count + " (ineligible-comm=" + count + ")"});
  if (kind == "initall") CHECK(infoAbout(run.err, comms[1], "released:") == std::vector<std::string>{prefix + "0"});
  for (const std::string& comm : comms) {
    const std::vector<std::string> reasons = infoAbout(run.err, comm, "setup: not eligible:");
    REQUIRE(reasons.size() == 1);
    CHECK_FALSE(reasons[0].empty());
  }
  if (kind == "rank1") CHECK(carLines(run.err, "WARN").empty());
}
