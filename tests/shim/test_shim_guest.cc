// Where a program goes around the library (a fork()ed child, NCCL's pnccl* names or a handle to
// the real NCCL) or around the moment it looks (an abort while a call is on its way to NCCL):
// NCCL's semantics hold, and our side of a communicator is released once, by the protocol.
#include <catch2/catch.hpp>
#include <nccl.h>

#include "call_checks.h"

using namespace shimtest;

namespace {

const char* kReleasedForwarded1 =
    "taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded 1 (ineligible-comm=1)";
const char* kReleasedForwarded2 =
    "taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded 2 (ineligible-comm=2)";

}  // namespace

TEST_CASE("guest: a fork()ed child leaves the parent's side of a communicator alone; NCCL serves it there",
          "[shim][guest][fork]") {
  const ChildResult run = runDriver({"fork"}, {"NCCL_CAR_DEBUG=INFO"});
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  const Outputs outputs = parseOutputs(run.out);
  const std::string comm = madeComms(outputs, "init").at(0);
  CHECK(outputs.at("child").get("status") == "0");
  // The child's calls reached NCCL, unchanged, and NCCL's answers came back.
  CHECK(outputs.at("child.ar").get("result") == "0");
  CHECK(outputs.at("child.destroy").get("result") == "0");
  CHECK(linesWith(run.log, {"ncclCommDestroy comm=" + comm, " result=0"}).size() == 2);
  // The child said so once, and released nothing of ours: the one released: line is the
  // parent's, counting only the parent's two all-reduces.
  CHECK(linesWith(run.err, {"is a fork()ed child: the 1 communicator(s) it inherited are NCCL's alone here"}).size() == 1);
  CHECK(infoAbout(run.err, comm, "released:") == std::vector<std::string>{kReleasedForwarded2});
}

TEST_CASE("guest: a fork()ed child that ends a group the parent had open sets up nothing of the parent's",
          "[shim][guest][fork]") {
  const ChildResult run = runDriver({"fork-in-group"}, {"NCCL_CAR_DEBUG=INFO"});
  INFO(run.out << run.err << run.log);
  REQUIRE(run.exitCode == 0);
  const Outputs outputs = parseOutputs(run.out);
  CHECK(outputs.at("child").get("status") == "0");
  const std::string comm = madeComms(outputs, "init").at(0);
  // The set-up asks NCCL for the communicator's size once, in the parent's group end only.
  CHECK(linesWith(run.log, {"ncclCommCount comm=" + comm}).size() == 1);
  CHECK(infoAbout(run.err, comm, "setup: not eligible:").size() == 1);
  CHECK(infoAbout(run.err, comm, "released:") == std::vector<std::string>{kReleasedForwarded1});
}

TEST_CASE("guest: a communicator freed behind the library's back is released once its address comes back",
          "[shim][guest][reuse]") {
  const std::string how = GENERATE(as<std::string>{}, "pnccl", "handle");
  INFO("ended through " << how);
  const ChildResult run = runDriver({"address-reuse", how}, {"NCCL_CAR_DEBUG=INFO", "STANDIN_NCCL_REUSE_ADDRESSES=1"});
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  const Outputs outputs = parseOutputs(run.out);
  const std::string comm = madeComms(outputs, "init.1").at(0);
  REQUIRE(madeComms(outputs, "init.2").at(0) == comm);  // the stand-in gave the address out again
  // One WARN says what happened; the old state is released (its one all-reduce), before the
  // new one is set up, and the new one counts only its own calls.
  const std::vector<std::string> warns = linesWith(run.err, {"NCCL-CAR WARN", "comm " + comm, "gave this communicator's address to a new one"});
  CHECK(warns.size() == 1);
  CHECK(infoAbout(run.err, comm, "released:") == std::vector<std::string>{kReleasedForwarded1, kReleasedForwarded2});
  CHECK(infoAbout(run.err, comm, "setup: not eligible:").size() == 2);
  // The library sent nothing to NCCL for the old communicator after it was freed.
  CHECK(linesWith(run.log, {" dead=1"}).empty());
}

TEST_CASE("guest: an abort from another thread is not held back by a forwarded call inside NCCL",
          "[shim][guest][recovery]") {
  // The program's own call goes to NCCL as it would without the library: an abort meant to
  // break it reaches NCCL at once (NCCL's abort is made to interrupt calls inside it), and
  // the call gets what NCCL answers.
  const ChildResult run = runDriver({"abort-in-forward"}, {"NCCL_CAR_DEBUG=INFO", "STANDIN_NCCL_DELAY_MS_ncclAllReduce=2000"});
  INFO(run.out << run.log << run.err);
  REQUIRE(run.exitCode == 0);
  const Outputs outputs = parseOutputs(run.out);
  CHECK(outputs.at("watchdog").get("result") == "0");
  std::size_t allReduceAt = std::string::npos;
  std::size_t abortAt = std::string::npos;
  const std::vector<std::string> lines = splitLines(run.log);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const Call call = parseCall(lines[i]);
    if (call.name == "ncclAllReduce" && !call.get("result").empty()) allReduceAt = i;
    if (call.name == "ncclCommAbort" && !call.get("result").empty()) abortAt = i;
  }
  REQUIRE(allReduceAt != std::string::npos);
  REQUIRE(abortAt != std::string::npos);
  CHECK(abortAt < allReduceAt);  // the abort returned while the all-reduce was still inside NCCL
  CHECK(carLines(run.err, "WARN").empty());
}

TEST_CASE("guest: a profiler of NCCL's kind, before or behind the library, passes every call to NCCL once",
          "[shim][guest][exports]") {
  const bool behind = GENERATE(true, false);
  INFO((behind ? "profiler behind the library" : "profiler before the library"));
  const std::string preload = behind ? std::string(shimLibrary()) + " " + CAR_TEST_PROFILER
                                     : std::string(CAR_TEST_PROFILER) + " " + shimLibrary();
  const ChildResult run = runDriver({"plain"}, {"NCCL_CAR_DEBUG=INFO", "LD_PRELOAD=" + preload});
  INFO(run.out << run.err);
  // No recursion between its pnccl* calls and our hooks: the run ends, each call reached NCCL
  // once, and the profiler saw each of its two calls once.
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  REQUIRE(linesWith(run.out, {"done"}).size() == 1);
  CHECK(linesWith(run.log, {"ncclAllReduce ", " result=0"}).size() == 1);
  CHECK(linesWith(run.log, {"ncclCommDestroy ", " result=0"}).size() == 1);
  CHECK(linesWith(run.err, {"profiler: ncclAllReduce"}).size() == 1);
  CHECK(linesWith(run.err, {"profiler: ncclCommDestroy"}).size() == 1);
  const std::string comm = madeComms(parseOutputs(run.out), "init").at(0);
  if (behind) {
    // Our hooks come first: the communicator is ours to the end, its all-reduce counted.
    CHECK(infoAbout(run.err, comm, "released:") == std::vector<std::string>{kReleasedForwarded1});
  } else {
    // The profiler took the nccl* names and calls NCCL's pnccl* ones: those calls pass us by.
    CHECK(infoAbout(run.err, comm, "released:").empty());
  }
}
