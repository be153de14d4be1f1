// What libnccl-car.so shows the dynamic linker: exactly the hooks of shim/exports.map,
// and no shared library that the host process may not have (NCCL, CUDA, fmt, spdlog).
#include <catch2/catch.hpp>

#include <algorithm>

#include "child_process.h"
#include "elf_symbols.h"

using namespace shimtest;

TEST_CASE("exports: libnccl-car.so exports exactly the hooks in shim/exports.map", "[shim][exports]") {
  const DynamicInfo shim = readDynamicInfo(shimLibrary());
  const std::set<std::string> mapped = versionScriptGlobals(exportsMap());
  CHECK(shim.exported == mapped);
  // Every way a communicator is born or ends, the groups and the all-reduce (DESIGN.md).
  for (const char* hook : {"ncclAllReduce", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommInitRankScalable",
                           "ncclCommInitAll", "ncclCommSplit", "ncclCommShrink", "ncclCommDestroy", "ncclCommAbort",
                           "ncclCommFinalize", "ncclCommRevoke", "ncclGroupStart", "ncclGroupEnd",
                           "ncclGroupSimulateEnd"}) {
    INFO(hook);
    CHECK(mapped.count(hook) == 1);
  }
}

TEST_CASE("exports: libnccl-car.so needs no NCCL, CUDA runtime, fmt or spdlog library", "[shim][exports]") {
  const DynamicInfo shim = readDynamicInfo(shimLibrary());
  REQUIRE_FALSE(shim.needed.empty());  // the reader works: libc at least
  for (const std::string& library : shim.needed) {
    INFO(library);
    for (const char* forbidden : {"nccl", "cudart", "libcuda.", "fmt", "spdlog"}) {
      CHECK(library.find(forbidden) == std::string::npos);
    }
  }
}

TEST_CASE("exports: the stand-in is a libnccl.so.2 that exports only nccl* names", "[shim][exports]") {
  const DynamicInfo standin = readDynamicInfo(standinLibrary());
  CHECK(standin.soname == "libnccl.so.2");
  CHECK(standin.exported.count("ncclAllReduce") == 1);
  for (const std::string& name : standin.exported) {
    INFO(name);
    CHECK(name.rfind("nccl", 0) == 0);
  }
  // No GPU needed: it neither links nor calls CUDA.
  for (const std::string& library : standin.needed) CHECK(library.find("cuda") == std::string::npos);
  for (const std::string& name : standin.imported) CHECK(name.rfind("cu", 0) != 0);
  CHECK(standin.imported.count("write") == 1);  // the reader sees its imports
  const DynamicInfo driver = readDynamicInfo(driverProgram());
  CHECK(std::count(driver.needed.begin(), driver.needed.end(), "libnccl.so.2") == 1);
  for (const std::string& library : readDynamicInfo(nolibDriverProgram()).needed) {
    CHECK(library.find("nccl") == std::string::npos);
  }
}
