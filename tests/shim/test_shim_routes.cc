// Programs that load NCCL themselves (JAX/XLA, TensorFlow, XGBoost, ctypes bindings) and call
// it through dlsym(handle): which way of loading libnccl-car.so reaches our hooks, for each
// way of loading NCCL. "Reached" means the shim set the new communicators up (its queries
// follow the caller's init in the stand-in's log); "not reached" means NCCL saw nothing but
// the caller's own calls.
#include <catch2/catch.hpp>
#include <limits.h>
#include <stdlib.h>
#include <nccl.h>

#include "call_checks.h"
#include "route_runs.h"

using namespace shimtest;

namespace {

// The steps of shim_handle_driver's life-cycle that make communicators.
const std::set<std::string> kInits = {"init", "init.cfg", "initall", "split"};

ChildResult runOpened(Route route, const std::string& library) {
  return runThrough(route, handleDriverProgram(), {library}, {"NCCL_CAR_DEBUG=INFO"});
}

void checkReached(const ChildResult& run, const std::set<std::string>& setupSteps) {
  const std::vector<Segment> segments = checkSteps(run);
  checkSetupPlacement(segments, setupSteps);
  for (const auto& [label, output] : parseOutputs(run.out)) {
    INFO(label);
    if (output.has("result")) CHECK(output.get("result") == "0");
  }
  CHECK(linesWith(run.err, {"NCCL-CAR INFO", "real NCCL found as"}).size() == 1);
}

void checkNotReached(const ChildResult& run) {
  checkSetupPlacement(checkSteps(run), {});
  CHECK(linesWith(run.err, {"NCCL-CAR"}).empty());
}

}  // namespace

TEST_CASE("routes: dlopen(\"libnccl.so.2\") + dlsym(handle) reaches our hooks through the drop-in folder and "
          "LD_AUDIT, not through LD_PRELOAD", "[shim][routes]") {
  for (Route route : {Route::Dropin, Route::Audit, Route::PreloadAndAudit}) {
    INFO(routeName(route));
    const ChildResult run = runOpened(route, "libnccl.so.2");
    checkReached(run, kInits);
    // Forwarded to the stand-in, found by path: never to ourselves.
    CHECK(linesWith(run.err, {"real NCCL found as", folderOf(standinLibrary()) + "/libnccl.so.2"}).size() == 1);
  }
  checkNotReached(runOpened(Route::Preload, "libnccl.so.2"));
}

TEST_CASE("routes: a load by absolute path, as JAX loads the NCCL wheel's copy, is reached only through LD_AUDIT",
          "[shim][routes]") {
  checkReached(runOpened(Route::Audit, standinLibrary()), kInits);
  checkNotReached(runOpened(Route::Dropin, standinLibrary()));
  checkNotReached(runOpened(Route::Preload, standinLibrary()));
}

TEST_CASE("routes: under LD_AUDIT every later load of NCCL, by name or by path, gets libnccl-car.so again",
          "[shim][routes]") {
  // The first life-cycle loads the real NCCL behind us; the loader must still answer the
  // second dlopen with us, whether it names the soname, the file the program loaded first,
  // or the file we forward to (here NCCL_CAR_NCCL_LIB, another copy of the stand-in).
  const std::string path = standinLibrary();
  const std::string other = standinCopy();
  struct Case {
    std::string first, second, configured;
  };
  for (const Case& c : std::vector<Case>{{path, "libnccl.so.2", ""},
                                         {"libnccl.so.2", path, ""},
                                         {path, path, ""},
                                         {path, "libnccl.so.2", path},
                                         {"libnccl.so.2", other, other},
                                         {path, other, other}}) {
    INFO(c.first << " then " << c.second << " with NCCL_CAR_NCCL_LIB=" << c.configured);
    std::vector<std::string> env = {"NCCL_CAR_DEBUG=INFO"};
    if (!c.configured.empty()) env.push_back("NCCL_CAR_NCCL_LIB=" + c.configured);
    const ChildResult run =
        runThrough(Route::Audit, handleDriverProgram(), {c.first, "then", c.second}, env);
    std::set<std::string> setup = kInits;
    setup.insert("then.init");
    checkReached(run, setup);
    CHECK(parseOutputs(run.out).at("then").get("same") == "1");
  }
}

TEST_CASE("routes: a program linked against libnccl.so.2 reaches our hooks through every route, and the calls "
          "we do not hook reach NCCL unchanged", "[shim][routes]") {
  for (Route route : {Route::Preload, Route::Dropin, Route::Audit, Route::PreloadAndAudit}) {
    INFO(routeName(route));
    const ChildResult run = runThrough(route, driverProgram(), {"nonhooked"}, {"STANDIN_NCCL_DEVICE=5"});
    checkSetupPlacement(checkSteps(run), {"init"});
    const Outputs outputs = parseOutputs(run.out);
    CHECK(outputs.at("version").get("value") == std::to_string(standinVersionCode()));
    CHECK(outputs.at("cudev").get("value") == "5");
    CHECK(outputs.at("errstr").get("value") == "standin:_invalid_usage");
    CHECK(carLines(run.err, "WARN").empty());
  }
}

namespace {

// A device-API run (shim_driver or shim_handle_driver "device-api", or the ctypes client):
// every step reached NCCL once with its arguments and answered 0, and our hook saw the
// all-reduce (forwarded: a one-rank communicator is not ours).
void checkDeviceApiReached(const ChildResult& run) {
  INFO(run.out << run.err);
  REQUIRE(run.exitCode == 0);
  checkSetupPlacement(checkSteps(run), {"init"});
  const Outputs outputs = parseOutputs(run.out);
  for (const char* label : {"devcreate", "ar", "devdestroy"}) {
    INFO(label);
    CHECK(outputs.at(label).get("result") == "0");
  }
  const std::string comm = outputs.at("init").get("made");
  REQUIRE(infoAbout(run.err, comm, "released:").size() == 1);
  CHECK(infoAbout(run.err, comm, "released:")[0].find("forwarded 1 (ineligible-comm=1)") != std::string::npos);
}

}  // namespace

TEST_CASE("routes: a program linked against NCCL that binds functions nccl.h lacks (the device API, as PyTorch's "
          "libtorch_cuda.so does) starts, and reaches them and our hooks, through every route",
          "[shim][routes][deviceapi]") {
  for (Route route : {Route::Preload, Route::Dropin, Route::Audit, Route::PreloadAndAudit}) {
    INFO(routeName(route));
    checkDeviceApiReached(runThrough(route, driverProgram(), {"device-api"}, {"NCCL_CAR_DEBUG=INFO"}));
  }
}

TEST_CASE("routes: a program that dlopens NCCL, by name or by path, finds functions nccl.h lacks and our hooks on "
          "its handle through the drop-in folder and LD_AUDIT", "[shim][routes][deviceapi]") {
  const std::vector<std::pair<Route, std::string>> reaching = {{Route::Dropin, "libnccl.so.2"},
                                                               {Route::Audit, "libnccl.so.2"},
                                                               {Route::Audit, standinLibrary()},
                                                               {Route::PreloadAndAudit, "libnccl.so.2"}};
  for (const auto& [route, library] : reaching) {
    INFO(routeName(route) << ", dlopen(\"" << library << "\")");
    checkDeviceApiReached(
        runThrough(route, handleDriverProgram(), {library, "device-api"}, {"NCCL_CAR_DEBUG=INFO"}));
  }
  // LD_PRELOAD leaves the handle the real NCCL's: the device API answers, our hooks see nothing.
  const ChildResult run = runThrough(Route::Preload, handleDriverProgram(), {"libnccl.so.2", "device-api"});
  CHECK(run.exitCode == 0);
  checkNotReached(run);
}

namespace {

// `nccl-car run --mode <mode> --lib <ours> --nccl-lib <the stand-in> -- <command>`.
ChildResult runTool(const std::string& mode, const std::vector<std::string>& command) {
  ChildRun run;
  run.program = pythonProgram();
  // The real NCCL named: found otherwise, the tool would load it (as doctor does) and its
  // version query would be in the stand-in's log before the program's first step.
  run.args = {toolProgram(), "run", "--mode", mode, "--lib", shimLibrary(), "--nccl-lib", standinLibrary(), "--"};
  run.args.insert(run.args.end(), command.begin(), command.end());
  run.env = {"LD_LIBRARY_PATH=" + folderOf(standinLibrary())};
  run.preload = false;
  return runChild(run);
}

}  // namespace

TEST_CASE("routes: nccl-car run, in every mode, brings the library to a linked program, a program that dlopens "
          "NCCL and a ctypes client, which reach the device API as well; its summary counts what they did",
          "[shim][routes][deviceapi][tool]") {
  const std::vector<std::string> linked = {driverProgram(), "device-api"};
  const std::vector<std::string> opener = {handleDriverProgram(), "libnccl.so.2", "device-api"};
  const std::vector<std::string> ctypes = {pythonProgram(), ctypesClient(), "libnccl.so.2"};
  for (const std::string mode : {"preload", "audit", "dropin", "auto"}) {
    for (const std::vector<std::string>& command : {linked, opener, ctypes}) {
      INFO("nccl-car run --mode " << mode << " -- " << command[0] << " " << command[1]);
      const ChildResult run = runTool(mode, command);
      INFO(run.out << run.err);
      REQUIRE(run.exitCode == 0);
      const Outputs outputs = parseOutputs(run.out);
      CHECK(outputs.at("devcreate").get("result") == "0");
      CHECK(outputs.at("devdestroy").get("result") == "0");
      // LD_PRELOAD does not reach a handle: the tool says so, and what to try. Without
      // --mode it takes LD_PRELOAD for shim_handle_driver too: nothing in that file names
      // NCCL (the name is its argument), unlike the ctypes client's script.
      const bool preloaded = mode == "preload" || (mode == "auto" && command == opener);
      const bool reached = !(preloaded && command != linked);
      if (reached) {
        checkSetupPlacement(checkSteps(run), {"init"});
        CHECK(linesWith(run.err, {"nccl-car: 1 process(es); 1 communicator(s)"}).size() == 1);
        CHECK(linesWith(run.err, {"  forwarded to NCCL: 1 call(s) (ineligible-comm 1)"}).size() == 1);
      } else {
        checkSetupPlacement(checkSteps(run), {});
        CHECK(linesWith(run.err, {"nccl-car: no communicator reached the library"}).size() == 1);
        CHECK(linesWith(run.err, {"  try: --mode audit"}).size() == 1);
      }
    }
  }
}

TEST_CASE("routes: a Python ctypes client reaches our hooks through the drop-in folder and LD_AUDIT, and its "
          "other calls reach NCCL unchanged with their results", "[shim][routes][ctypes]") {
  const std::vector<std::string> forced = {"NCCL_CAR_DEBUG=INFO", "STANDIN_NCCL_RESULT_ncclBroadcast=6",
                                           "STANDIN_NCCL_RESULT_ncclCommRegister=3"};
  const std::vector<std::pair<Route, std::string>> reaching = {
      {Route::Dropin, "libnccl.so.2"}, {Route::Audit, "libnccl.so.2"}, {Route::Audit, standinLibrary()}};
  for (const auto& [route, library] : reaching) {
    INFO(routeName(route) << ", ctypes.CDLL(\"" << library << "\")");
    const ChildResult run = runThrough(route, pythonProgram(), {ctypesClient(), library}, forced);
    checkSetupPlacement(checkSteps(run), {"init"});
    const Outputs outputs = parseOutputs(run.out);
    CHECK(outputs.at("version").get("value") == std::to_string(standinVersionCode()));
    CHECK(outputs.at("bcast").get("result") == "6");
    CHECK(outputs.at("register").get("result") == "3");
    CHECK(outputs.at("errstr").get("value") == "standin:_invalid_usage");
    // Functions nccl.h lacks, which the library does not export: the real NCCL's own.
    CHECK(outputs.at("devcreate").get("result") == "0");
    CHECK(outputs.at("devdestroy").get("result") == "0");
    // Our hook counted the all-reduce (forwarded: a one-rank communicator is not ours).
    const std::string comm = outputs.at("init").get("made");
    REQUIRE(infoAbout(run.err, comm, "released:").size() == 1);
    CHECK(infoAbout(run.err, comm, "released:")[0].find("forwarded 1 (ineligible-comm=1)") != std::string::npos);
  }
  checkNotReached(runThrough(Route::Preload, pythonProgram(), {ctypesClient(), "libnccl.so.2"}, forced));
}

TEST_CASE("routes: the real NCCL, where the build found one, answers through LD_AUDIT and the drop-in folder as "
          "it answers alone", "[shim][routes][realnccl]") {
  // Calls that need no GPU: on CI this is as far as the real library can be driven.
  const std::string real = realNcclLibrary();
  if (real.empty()) {
    FAIL("no real libnccl.so.2 in this build: ctest runs this case only where the build found one");
  }
  const std::string probe =
      "import ctypes, sys\n"
      "nccl = ctypes.CDLL(sys.argv[1])\n"
      "version = ctypes.c_int()\n"
      "print('version', nccl.ncclGetVersion(ctypes.byref(version)), version.value)\n"
      "nccl.ncclGetErrorString.restype = ctypes.c_char_p\n"
      "print('text', nccl.ncclGetErrorString(5).decode())\n"
      "print('group', nccl.ncclGroupStart(), nccl.ncclGroupEnd())\n";  // hooks: they find the real NCCL
  const std::string folder = folderOf(real);
  ChildRun alone;
  alone.program = pythonProgram();
  alone.args = {"-c", probe, "libnccl.so.2"};
  alone.env = {"LD_LIBRARY_PATH=" + folder};
  alone.preload = false;
  const ChildResult expected = runChild(alone);
  REQUIRE(expected.exitCode == 0);
  REQUIRE(linesWith(expected.out, {"version 0 "}).size() == 1);
  REQUIRE(linesWith(expected.out, {"group 0 0"}).size() == 1);
  for (const auto& [route, library] : std::vector<std::pair<Route, std::string>>{
           {Route::Audit, "libnccl.so.2"}, {Route::Audit, real}, {Route::Dropin, "libnccl.so.2"}}) {
    INFO(routeName(route) << ", " << library);
    const ChildResult run =
        runThrough(route, pythonProgram(), {"-c", probe, library}, {"NCCL_CAR_DEBUG=INFO"}, folder);
    CHECK(run.exitCode == 0);
    CHECK(run.out == expected.out);
    // The group calls came through our hooks, which found that very file behind the front.
    char file[PATH_MAX];
    REQUIRE(realpath(real.c_str(), file) != nullptr);
    CHECK(linesWith(run.err, {"NCCL-CAR INFO real NCCL found as", file}).size() == 1);
  }
}
