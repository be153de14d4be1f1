// A communicator never destroyed (JAX never destroys its own) reports its counts when the
// process exits, in one "alive at exit:" line read from host counters (shim/lifecycle/
// exit_counts.cc), and nccl-car run sums it with the released: lines. Nothing reaches NCCL
// then: the stand-in's log ends with the program's last call.
#include <catch2/catch.hpp>

#include "call_checks.h"
#include "route_runs.h"

using namespace shimtest;

TEST_CASE("exit: a communicator never destroyed reports its counts at exit; a destroyed one only at its release; "
          "nothing reaches NCCL after the program's last call", "[shim][exit]") {
  const ChildResult run = runDriver({"never-destroyed"}, {"NCCL_CAR_DEBUG=INFO"});
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  // Every step reached NCCL once, and nothing else did: no call of ours at exit.
  checkSetupPlacement(checkSteps(run), {"init", "alive"});
  const Outputs outputs = parseOutputs(run.out);
  const std::string destroyed = outputs.at("init").get("made"), alive = outputs.at("alive").get("made");
  REQUIRE(infoAbout(run.err, destroyed, "released:").size() == 1);
  CHECK(infoAbout(run.err, destroyed, "alive at exit:").empty());
  CHECK(infoAbout(run.err, alive, "released:").empty());
  const std::string atExit = onlyInfo(run.err, alive, "alive at exit:");
  CHECK(atExit.find("forwarded 3 (ineligible-comm=3)") != std::string::npos);
  // Said after the program's own last line.
  CHECK(run.err.rfind("alive at exit:") > run.err.rfind("released:"));
}

TEST_CASE("exit: a process that ends with _exit says nothing at exit", "[shim][exit]") {
  const ChildResult run = runDriver({"never-destroyed", "_exit"}, {"NCCL_CAR_DEBUG=INFO"});
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  // The same program as above got as far, logging: the destroyed one's line is there.
  const Outputs outputs = parseOutputs(run.out);
  REQUIRE(outputs.count("alive") == 1);
  CHECK(infoAbout(run.err, outputs.at("init").get("made"), "released:").size() == 1);
  CHECK(linesWith(run.err, {"alive at exit:"}).empty());
}

TEST_CASE("exit: nccl-car run sums the counts at exit with the released: lines and says so", "[shim][exit][tool]") {
  ChildRun run;
  run.program = pythonProgram();
  run.args = {toolProgram(), "run", "--mode", "preload", "--lib", shimLibrary(), "--", driverProgram(),
              "never-destroyed"};
  run.env = {"LD_LIBRARY_PATH=" + folderOf(standinLibrary())};
  run.preload = false;
  const ChildResult result = runChild(run);
  INFO(result.out << result.err);
  REQUIRE(result.exitCode == 0);
  CHECK(linesWith(result.err, {"  forwarded to NCCL: 4 call(s) (ineligible-comm 4)"}).size() == 1);
  CHECK(linesWith(result.err, {"  1 communicator rank(s) alive at exit (never destroyed)"}).size() == 1);
  CHECK(linesWith(result.err, {"never released"}).empty());
}
