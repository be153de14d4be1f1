// 1,000 create / all-reduce / destroy cycles through the shim leave the process's open
// files and memory mappings where they were (no per-communicator handle, dlopen or file
// left behind). On a GPU machine the GPU tests check device memory the same way.
#include <catch2/catch.hpp>

#include <regex>

#include "call_checks.h"

using namespace shimtest;

TEST_CASE("cycles: 1,000 communicator life-cycles leak no file or mapping", "[shim][leak]") {
  const ChildResult run = runDriver({"cycles", "1000"}, {"NCCL_CAR_DEBUG=INFO"});
  INFO(run.out << run.err.substr(0, 2000));
  REQUIRE_FALSE(run.timedOut);
  REQUIRE(run.exitCode == 0);
  std::smatch numbers;
  const std::regex pattern(
      "cycles=1000 failures=0 files_before=(\\d+) files_after=(\\d+) mappings_before=(\\d+) mappings_after=(\\d+)");
  REQUIRE(std::regex_search(run.out, numbers, pattern));
  CHECK(numbers[1] == numbers[2]);
  CHECK(numbers[3] == numbers[4]);
  // Every communicator was really adopted and released by the library each cycle.
  CHECK(linesWith(run.err, {"NCCL-CAR INFO", "released:"}).size() == 3000);
}
