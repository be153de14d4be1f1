// Runs a test program as a child process with a controlled environment: nothing of the
// test's own environment leaks in except sanitizer options. Collects its exit status, its
// stdout and stderr, and the stand-in NCCL's call log (STANDIN_NCCL_LOG, set here).
#pragma once

#include <string>
#include <vector>

namespace shimtest {

// Paths of what the build made, from CMake. The library under test and its audit module can
// be an installed copy instead (tests/install/run-install-tests.sh): CAR_TEST_SHIM_LIBRARY
// and CAR_TEST_AUDIT_LIBRARY name them; the front is the one beside that library.
const char* shimLibrary();
inline const char* driverProgram() { return CAR_SHIM_DRIVER; }
inline const char* nolibDriverProgram() { return CAR_SHIM_NOLIB_DRIVER; }
// The stand-in NCCL, and the nccl.h it was built from: this build's, or another API level's
// named by CAR_STANDIN_LIBRARY and CAR_STANDIN_NCCL_HEADER in the suite's environment (the
// suite run over an older or a newer NCCL: tests/CMakeLists.txt).
const char* standinLibrary();
const char* standinHeader();
// That nccl.h's NCCL_VERSION_CODE: what the stand-in's ncclGetVersion answers.
int standinVersionCode();
inline const char* handleDriverProgram() { return CAR_SHIM_HANDLE_DRIVER; }
const char* auditLibrary();
// The front beside the library (shim/exports/front_names.h).
std::string frontLibrary();
// The nccl-car command-line tool (tools/nccl-car), which makes drop-in folders.
inline const char* toolProgram() { return CAR_NCCL_CAR_TOOL; }
// The stand-in of NCCL 2.12, the oldest NCCL we pass through: it lacks every function added since.
inline const char* oldStandinLibrary() { return CAR_OLD_STANDIN_LIBRARY; }
// The nccl.h libnccl-car.so and this suite were built against.
inline const char* ncclHeader() { return CAR_NCCL_HEADER; }
inline const char* pythonProgram() { return CAR_PYTHON; }
inline const char* ctypesClient() { return CAR_CTYPES_CLIENT; }
// The real libnccl.so.2 CMake found (for the end-to-end programs), "" when there is none.
inline const char* realNcclLibrary() { return CAR_REAL_NCCL_LIBRARY; }

struct ChildRun {
  std::string program = driverProgram();
  std::vector<std::string> args;
  std::vector<std::string> env;  // NAME=value
  bool preload = true;           // LD_PRELOAD=libnccl-car.so
  int timeoutSeconds = 120;
};

struct ChildResult {
  int exitCode = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timedOut = false;
  std::string out;
  std::string err;
  std::string log;  // the stand-in's call log with the driver's markers
};

ChildResult runChild(const ChildRun& run);

// A new empty folder under the temporary directory, named PREFIX-XXXXXX; throws if none can be made.
std::string makeTempDir(const std::string& prefix);

// shim_driver <args...> with the given extra environment.
ChildResult runDriver(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                      bool preload = true);

}  // namespace shimtest
