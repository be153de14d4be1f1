// Where a program goes around the library (a fork()ed child, NCCL's pnccl* names, a handle to
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

TEST_CASE("guest: a communicator made, used and ended through NCCL's pnccl* names is ours as through nccl*",
          "[shim][guest][exports]") {
  const ChildResult run = runDriver({"profiling-names"}, {"NCCL_CAR_DEBUG=INFO"});
  INFO(run.out << run.err);
  const std::vector<Segment> segments = checkSteps(run);
  // Set up right after its init, as one made through ncclCommInitRank is.
  checkSetupPlacement(segments, {"init"});
  const Outputs outputs = parseOutputs(run.out);
  const std::string comm = madeComms(outputs, "init").at(0);
  CHECK(infoAbout(run.err, comm, "setup: not eligible:").size() == 1);
  CHECK(infoAbout(run.err, comm, "released:") == std::vector<std::string>{kReleasedForwarded1});
}

TEST_CASE("guest: a communicator freed behind the library's back is released once its address comes back",
          "[shim][guest][reuse]") {
  const ChildResult run = runDriver({"address-reuse"}, {"NCCL_CAR_DEBUG=INFO", "STANDIN_NCCL_REUSE_ADDRESSES=1"});
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

TEST_CASE("guest: an abort from another thread waits until a forwarded call has reached NCCL",
          "[shim][guest][recovery]") {
  const ChildResult run = runDriver({"abort-in-forward"}, {"NCCL_CAR_DEBUG=INFO", "STANDIN_NCCL_DELAY_MS_ncclAllReduce=400"});
  INFO(run.out << run.log << run.err);
  REQUIRE(run.exitCode == 0);
  const Outputs outputs = parseOutputs(run.out);
  CHECK(outputs.at("ar").get("result") == "0");
  CHECK(outputs.at("watchdog").get("result") == "0");
  // NCCL took the all-reduce on a live communicator, then the abort.
  CHECK(linesWith(run.log, {" dead=1"}).empty());
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
  CHECK(allReduceAt < abortAt);
}
