// The NCCL calls the shim does not interpose go to NCCL directly, and the shim never adds
// a call around them.
#include <catch2/catch.hpp>
#include <nccl.h>

#include "call_checks.h"

using namespace shimtest;

TEST_CASE("nonhooked: other NCCL calls reach NCCL once, unchanged, with their results", "[shim][nonhooked]") {
  const ChildResult run = runDriver({"nonhooked"}, {"STANDIN_NCCL_DEVICE=5"});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {"init"});

  const Outputs outputs = parseOutputs(run.out);
  CHECK(outputs.at("version").get("value") == std::to_string(standinVersionCode()));
  CHECK(outputs.at("count").get("value") == "1");
  CHECK(outputs.at("cudev").get("value") == "5");
  CHECK(outputs.at("userrank").get("value") == "0");
  CHECK(outputs.at("asyncerr").get("value") == "0");
  CHECK(outputs.at("lasterror").get("value") == "standin:_last_error_text");
  CHECK(outputs.at("errstr").get("value") == "standin:_invalid_usage");
  CHECK(carLines(run.err, "WARN").empty());
}
