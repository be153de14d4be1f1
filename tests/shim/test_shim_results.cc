// The caller gets back exactly what NCCL returns: STANDIN_NCCL_RESULT_<function> makes the
// stand-in return a chosen code, for hooked and non-hooked functions alike.
#include <catch2/catch.hpp>
#include <nccl.h>

#include "call_checks.h"

using namespace shimtest;

namespace {

struct Forced {
  const char* function;
  const char* scenario;
  int code;
};

bool createsCommunicators(const std::string& function) {
  return function.rfind("ncclCommInit", 0) == 0 || function == "ncclCommSplit" || function == "ncclCommShrink";
}

}  // namespace

TEST_CASE("results: every function's result code reaches the caller unchanged", "[shim][results]") {
  const Forced forced = GENERATE(values<Forced>({
      {"ncclCommInitRank", "lifecycle", 5}, {"ncclCommInitRankConfig", "lifecycle", 3},
      {"ncclCommInitRankScalable", "lifecycle", 4}, {"ncclCommInitAll", "lifecycle", 6},
      {"ncclCommSplit", "lifecycle", 1}, {"ncclCommShrink", "lifecycle", 2}, {"ncclCommDestroy", "lifecycle", 5},
      {"ncclCommAbort", "lifecycle", 6}, {"ncclCommFinalize", "lifecycle", 3}, {"ncclAllReduce", "lifecycle", 4},
      {"ncclCommRevoke", "lifecycle", 6}, {"ncclGroupSimulateEnd", "simulate", 4},
      {"ncclGroupStart", "groups", 3}, {"ncclGroupEnd", "groups", 6}, {"ncclBroadcast", "nonhooked", 1},
      {"ncclReduce", "nonhooked", 2}, {"ncclAllGather", "nonhooked", 3}, {"ncclReduceScatter", "nonhooked", 4},
      {"ncclSend", "nonhooked", 5}, {"ncclRecv", "nonhooked", 6}, {"ncclGetVersion", "nonhooked", 2},
      {"ncclGetUniqueId", "nonhooked", 3}, {"ncclCommCount", "nonhooked", 4}, {"ncclCommCuDevice", "nonhooked", 5},
      {"ncclCommUserRank", "nonhooked", 1}, {"ncclCommGetAsyncError", "nonhooked", 6}}));
  INFO(forced.function << " forced to " << forced.code << " in " << forced.scenario);
  const ChildResult run = runDriver(
      {forced.scenario}, {std::string("STANDIN_NCCL_RESULT_") + forced.function + "=" + std::to_string(forced.code)});
  const std::vector<Segment> segments = checkSteps(run);  // also: each result the driver saw is NCCL's
  const Outputs outputs = parseOutputs(run.out);
  int steps = 0;
  for (const Segment& segment : segments) {
    if (segment.expected.name != forced.function) continue;
    ++steps;
    INFO("step " << segment.label);
    CHECK(outputs.at(segment.label).get("result") == std::to_string(forced.code));
    // A communicator NCCL failed to create is not ours to set up.
    if (createsCommunicators(forced.function)) CHECK(viewOf(segment).trafficCount() == 0);
  }
  CHECK(steps > 0);
}

TEST_CASE("results: an all-reduce returns each of NCCL's codes unchanged", "[shim][results]") {
  const int code = GENERATE(range(1, 8));
  const ChildResult run =
      runDriver({"allreduce-matrix", "rank1"}, {"STANDIN_NCCL_RESULT_ncclAllReduce=" + std::to_string(code)});
  const std::vector<Segment> segments = checkSteps(run);
  const Outputs outputs = parseOutputs(run.out);
  for (const Segment& segment : segments) {
    if (segment.expected.name != "ncclAllReduce") continue;
    INFO("step " << segment.label);
    CHECK(outputs.at(segment.label).get("result") == std::to_string(code));
  }
}

TEST_CASE("results: a communicator created in progress is set up at its first all-reduce, not in its init",
          "[shim][results][nonblocking]") {
  // Either NCCL says ncclInProgress for a blocking-looking init, or NCCL_COMM_BLOCKING=0
  // makes every communicator without a config nonblocking (the stand-in honours it too).
  // NCCL has finished creating it by the first all-reduce (STANDIN_NCCL_ASYNC_POLLS=0), as a
  // program that waited for it would see.
  const std::string setting = GENERATE(as<std::string>{}, "STANDIN_NCCL_RESULT_ncclCommInitRank=7",
                                       "NCCL_COMM_BLOCKING=0");
  INFO(setting);
  const ChildResult run = runDriver({"allreduce-matrix", "rank1"}, {setting, "STANDIN_NCCL_ASYNC_POLLS=0"});
  const std::vector<Segment> segments = checkSteps(run);
  CHECK(parseOutputs(run.out).at("init").get("result") == std::to_string(ncclInProgress));
  checkSetupPlacement(segments, {"ar.base"});
}

TEST_CASE("results: the caller's own argument errors come back exactly as NCCL returns them", "[shim][results]") {
  const ChildResult run = runDriver({"badargs"});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {});  // nothing to set up: every creation failed
  const Outputs outputs = parseOutputs(run.out);
  for (const Segment& segment : segments) {
    if (segment.label == "uid") continue;
    INFO("step " << segment.label);
    CHECK(outputs.at(segment.label).get("result") != "0");  // the stand-in rejected it, and so did the caller
  }
  CHECK(linesWith(run.err, {"NCCL-CAR"}).empty());
}
