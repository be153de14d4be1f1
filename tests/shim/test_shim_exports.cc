// What libnccl-car.so shows the dynamic linker: exactly its hooks, and no shared library
// that the host process may not have (NCCL, CUDA, fmt, spdlog); every other NCCL function is
// the real library's own (docs/design.md, "Three ways in"). What the front shows: nothing of
// its own, libnccl-car.so and then the real NCCL's private name. What the audit module shows:
// its three callbacks, libc only.
#include <catch2/catch.hpp>
#include <nccl.h>

#include <algorithm>

#include "child_process.h"
#include "elf_symbols.h"
#include "nccl_header.h"

using namespace shimtest;

namespace {

#define CAR_NCCL_FUNCTION(ret, name, params, args) #name,

std::set<std::string> tableNames() {
  return {
#include "exports/nccl_api.def"
  };
}

std::set<std::string> tableNamesOfNccl212() {
#undef CAR_NCCL_API_LEVEL
#define CAR_NCCL_API_LEVEL 21212
  return {
#include "exports/nccl_api.def"
  };
#undef CAR_NCCL_API_LEVEL
}

#undef CAR_NCCL_FUNCTION

// Every way a communicator is born or ends, the groups, the collectives we take, and the
// symmetric windows (noted for NCCL_CAR_SYMMETRIC_NCCL_BYTES) (docs/design.md). Of newer
// NCCLs: a communicator grown, one suspended, those collectives' per-call configs.
std::set<std::string> hooks() {
  std::set<std::string> names = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclCommInitRank",
                                 "ncclCommInitRankConfig", "ncclCommInitRankScalable", "ncclCommInitAll",
                                 "ncclCommSplit", "ncclCommShrink", "ncclCommDestroy", "ncclCommAbort",
                                 "ncclCommFinalize", "ncclCommRevoke", "ncclGroupStart", "ncclGroupEnd",
                                 "ncclGroupSimulateEnd", "ncclCommWindowRegister", "ncclCommWindowDeregister"};
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
  names.insert({"ncclCommGrow", "ncclCommSuspend", "ncclAllReduceConfig", "ncclAllGatherConfig",
                "ncclReduceScatterConfig"});
#endif
  return names;
}

// The names and, as NCCL exports them, their profiling twins (pnccl*).
std::set<std::string> withProfilingNames(const std::set<std::string>& names) {
  std::set<std::string> both = names;
  for (const std::string& name : names) both.insert("p" + name);
  return both;
}

}  // namespace

TEST_CASE("exports: the table holds exactly the functions of nccl.h; libnccl-car.so exports exactly its hooks",
          "[shim][exports]") {
  const std::set<std::string> header = ncclFunctionsOfHeader(ncclHeader());
  REQUIRE(header.count("ncclAllReduce") == 1);  // the reader works
  INFO("nccl.h: " << ncclHeader() << " (NCCL " << NCCL_VERSION_CODE << ")");
  // Fails when nccl.h gains a function: add it to shim/exports/nccl_api.def, under its release.
  CHECK(tableNames() == header);
  for (const std::string& name : header) CHECK(name.rfind("pnccl", 0) != 0);
  // The hooks, strong, and nothing else: no pnccl* (a profiler behind us reaches NCCL's own).
  const DynamicInfo shim = readDynamicInfo(shimLibrary());
  CHECK(shim.exported == hooks());
  CHECK(shim.weak.empty());
  for (const std::string& hook : hooks()) CHECK(header.count(hook) == 1);
}

TEST_CASE("exports: the front is an empty libnccl.so.2 that needs libnccl-car.so, then the real NCCL",
          "[shim][exports]") {
  const DynamicInfo front = readDynamicInfo(frontLibrary());
  CHECK(front.soname == "libnccl.so.2");
  CHECK(front.exported.empty());
  // In this order: our hooks come before the real NCCL's functions of the same name.
  REQUIRE(front.needed.size() >= 2);
  CHECK(front.needed[0] == CAR_FRONT_OUR_LIBRARY);
  CHECK(front.needed[1] == CAR_FRONT_REAL_NCCL);
  for (std::size_t i = 2; i < front.needed.size(); ++i) CHECK(front.needed[i].find("nccl") == std::string::npos);
}

TEST_CASE("exports: the nccl.h reader sees a function the header gains", "[shim][exports]") {
  const std::string text =
      "/* a comment: ncclNotDeclared(void); */\n"
      "#define NCCL_VERSION(X,Y,Z) ((X) * 10000)\n"
      "ncclResult_t  ncclGetVersion(int *version);\n"
      "ncclResult_t pncclGetVersion(int *version);\n"
      "const char*  ncclGetErrorString(ncclResult_t result);\n"
      "ncclResult_t  ncclFutureCall(ncclComm_t comm,\n    int flags);\n";
  CHECK(ncclFunctionsDeclaredIn(text) ==
        std::set<std::string>{"ncclGetVersion", "ncclGetErrorString", "ncclFutureCall"});
}

TEST_CASE("exports: the audit module exports its three callbacks and needs nothing but libc", "[shim][exports]") {
  const DynamicInfo audit = readDynamicInfo(auditLibrary());
  CHECK(audit.exported == std::set<std::string>{"la_version", "la_objopen", "la_objsearch"});
  // It lives in the loader's own namespace: a C++ runtime there would be a second copy.
  CHECK(audit.needed == std::vector<std::string>{"libc.so.6"});
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

TEST_CASE("exports: the stand-in is a libnccl.so.2 that exports only NCCL's names", "[shim][exports]") {
  const DynamicInfo standin = readDynamicInfo(standinLibrary());
  CHECK(standin.soname == "libnccl.so.2");
  // Every function of its nccl.h, hand-written or recorded generically, and two of the device
  // API (standin_device_api.h), each with its pnccl* twin as NCCL has them; besides them only
  // what the fake CUDA runtime asks it (standin_exchange.cc) and the count of rules it saw
  // broken (standin_nccl.h).
  const auto ownNames = [](std::set<std::string> names) {
    CHECK(names.erase("standinStreamBusy") == 1);
    CHECK(names.erase("standinViolations") == 1);
    return names;
  };
  std::set<std::string> expected = ncclFunctionsOfHeader(standinHeader());
  expected.insert({"ncclDevCommCreate", "ncclDevCommDestroy"});
  CHECK(ownNames(standin.exported) == withProfilingNames(expected));
  // The 2.12 one has only NCCL 2.12's.
  CHECK(ownNames(readDynamicInfo(oldStandinLibrary()).exported) == withProfilingNames(tableNamesOfNccl212()));
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
