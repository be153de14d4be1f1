// A program that links no libnccl and finds the hooks only in the preloaded shim: without
// a real NCCL every hooked call returns ncclSystemError and one WARN names
// NCCL_CAR_NCCL_LIB; with NCCL_CAR_NCCL_LIB pointing at one, the calls reach it.
#include <catch2/catch.hpp>
#include <nccl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "call_checks.h"

using namespace shimtest;

namespace {

const std::vector<std::string> kHooks = {"ncclAllReduce", "ncclCommInitRank", "ncclCommInitRankConfig",
                                         "ncclCommInitRankScalable", "ncclCommInitAll", "ncclCommSplit",
                                         "ncclCommShrink", "ncclCommDestroy", "ncclCommAbort",
                                         "ncclCommFinalize", "ncclGroupStart", "ncclGroupEnd",
                                         "ncclCommRevoke", "ncclGroupSimulateEnd"};

ChildResult runNolib(const std::vector<std::string>& env, bool preload, const std::vector<std::string>& args = {}) {
  ChildRun run;
  run.program = nolibDriverProgram();
  run.args = args;
  run.env = env;
  run.preload = preload;
  return runChild(run);
}

}  // namespace

TEST_CASE("no NCCL: without the preload the program finds no NCCL function at all", "[shim][nonccl]") {
  const ChildResult run = runNolib({}, false);
  CHECK(run.exitCode == 3);
  for (const std::string& hook : kHooks) CHECK(linesWith(run.out, {hook + " missing"}).size() == 1);
}

TEST_CASE("no NCCL: every hooked call returns ncclSystemError and one WARN names NCCL_CAR_NCCL_LIB",
          "[shim][nonccl]") {
  const ChildResult run = runNolib({"NCCL_CAR_NCCL_LIB=/nonexistent/libnccl.so.2"}, true);
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  CHECK(linesWith(run.out, {"missing"}).empty());
  const Outputs outputs = parseOutputs(run.out);
  int steps = 0;
  for (const auto& [label, output] : outputs) {
    if (!output.has("result")) continue;
    ++steps;
    INFO(label);
    CHECK(output.get("result") == std::to_string(ncclSystemError));
  }
  CHECK(steps == 20);
  const std::vector<std::string> warnings = carLines(run.err, "WARN");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("NCCL_CAR_NCCL_LIB") != std::string::npos);
  CHECK(linesWith(run.err, {"NCCL-CAR"}).size() == 1);
  CHECK(parseLog(run.log).size() == static_cast<std::size_t>(steps));  // markers only: no NCCL was reached
  for (const Segment& segment : parseLog(run.log)) CHECK(segment.calls.empty());
}

TEST_CASE("no NCCL: NCCL_CAR_NCCL_LIB names the library to use", "[shim][nonccl]") {
  const ChildResult run =
      runNolib({std::string("NCCL_CAR_NCCL_LIB=") + standinLibrary(), "NCCL_CAR_DEBUG=INFO"}, true);
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {"init", "init.cfg", "init.scal", "initall", "split", "shrink"});
  for (const auto& [label, output] : parseOutputs(run.out)) {
    if (output.has("result")) CHECK(output.get("result") == "0");
  }
  CHECK(linesWith(run.err, {"NCCL-CAR INFO", "real NCCL found as NCCL_CAR_NCCL_LIB"}).size() == 1);
  CHECK(linesWith(run.err, {"NCCL_CAR_NCCL_LIB", "NCCL-CAR WARN"}).empty());
}

TEST_CASE("no NCCL: a libnccl.so.2 the program loaded privately is found and used", "[shim][nonccl]") {
  // PyTorch's case (docs/design.md, "The real NCCL"): dlsym(RTLD_NEXT) cannot see it,
  // dlopen(RTLD_NOLOAD) can.
  const ChildResult run = runNolib({}, true, {"--load", standinLibrary()});
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, {"init", "init.cfg", "init.scal", "initall", "split", "shrink"});
  for (const auto& [label, output] : parseOutputs(run.out)) {
    if (output.has("result")) CHECK(output.get("result") == "0");
  }
}

TEST_CASE("no NCCL: over NCCL 2.12, every function added since returns ncclInvalidUsage with one WARN naming "
          "it, and every other call passes through", "[shim][nonccl][oldnccl]") {
  // Issue 24, item 5: the real NCCL is resolved with only NCCL 2.12's functions required.
  const std::map<std::string, std::string> added = {
      {"init.cfg", "ncclCommInitRankConfig"}, {"init.scal", "ncclCommInitRankScalable"},
      {"split", "ncclCommSplit"},             {"shrink", "ncclCommShrink"},
      {"g2.sim", "ncclGroupSimulateEnd"},     {"finalize", "ncclCommFinalize"},
      {"revoke", "ncclCommRevoke"}};
  const ChildResult run =
      runNolib({std::string("NCCL_CAR_NCCL_LIB=") + oldStandinLibrary(), "NCCL_CAR_DEBUG=INFO"}, true);
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  REQUIRE(linesWith(run.out, {"done"}).size() == 1);
  const Outputs outputs = parseOutputs(run.out);
  const std::vector<Segment> segments = parseLog(run.log);
  int passedThrough = 0;
  for (const Segment& segment : segments) {
    INFO("step " << segment.label);
    const Call& output = outputs.at(segment.label);
    const auto missing = added.find(segment.label);
    if (missing != added.end()) {
      CHECK(output.get("result") == std::to_string(ncclInvalidUsage));
      CHECK(segment.calls.empty());  // nothing reached the old NCCL
      CHECK(linesWith(run.err, {"NCCL-CAR WARN", missing->second + " is not in the real NCCL"}).size() == 1);
      continue;
    }
    // The rest reached NCCL 2.12 once, and its answer came back (ncclInvalidArgument for the
    // communicators the missing calls never made).
    const StepView view = viewOf(segment);
    REQUIRE(view.caller != nullptr);
    CHECK(view.caller->get("result") == output.get("result"));
    ++passedThrough;
  }
  CHECK(passedThrough == 13);
  CHECK(findSegment(segments, "init")->calls.size() > 1);  // and a communicator is still set up
  CHECK(linesWith(run.err, {"NCCL-CAR WARN", " is not in the real NCCL"}).size() == added.size());
  CHECK(linesWith(run.err, {"cannot find the real NCCL"}).empty());
  CHECK(linesWith(run.err, {"NCCL-CAR INFO", "real NCCL found as NCCL_CAR_NCCL_LIB"}).size() == 1);
}

TEST_CASE("no NCCL: a set-gid program does not take NCCL_CAR_NCCL_LIB from its environment", "[shim][nonccl]") {
  // Making a set-gid copy of the driver needs root and a file system that honours the bit.
  const std::string folder = makeTempDir("nccl-car-setgid");
  const std::string copy = folder + "/shim_nolib_driver";
  {
    std::ifstream in(nolibDriverProgram(), std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  const bool setgid = chown(copy.c_str(), getuid(), 65534) == 0 && chmod(copy.c_str(), 02755) == 0 &&
                      getgid() != 65534;
  if (!setgid) {
    WARN("cannot make a set-gid program here (needs root): secure_getenv not exercised");
  } else {
    ChildRun run;
    run.program = copy;
    run.args = {"--probe", shimLibrary()};
    run.env = {std::string("NCCL_CAR_NCCL_LIB=") + standinLibrary(), "NCCL_CAR_DEBUG=INFO"};
    run.preload = false;
    const ChildResult result = runChild(run);
    INFO(result.out << result.err);
    REQUIRE(result.exitCode == 0);
    CHECK(linesWith(result.err, {"real NCCL found as NCCL_CAR_NCCL_LIB"}).empty());
    CHECK(result.log.empty());  // the stand-in named there was never loaded

    // The same program, not set-gid: the variable is honoured (the test can tell).
    REQUIRE(chmod(copy.c_str(), 0755) == 0);
    const ChildResult plain = runChild(run);
    CHECK(linesWith(plain.err, {"real NCCL found as NCCL_CAR_NCCL_LIB"}).size() == 1);
  }
  std::remove(copy.c_str());
  rmdir(folder.c_str());
}
