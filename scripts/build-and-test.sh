#!/usr/bin/env bash
# README command 2: set up, build, and run the tests (CPU tests everywhere; the GPU tests
# run where a GPU is present and report themselves skipped elsewhere), then the installs
# (tests/install/run-install-tests.sh: cmake --install, and the wheel from this build folder
# in a new virtual environment, with the shim tests against it), then the shim's
# ThreadSanitizer check (tests/tsan/run-tsan.sh). The shim and its tests are also built
# against the second pinned nccl.h (scripts/nccl-headers.env) and tested over each other's
# stand-in NCCL: ctest's shim_tests.* (docs/design.md, "The real NCCL").
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" --other-api-level
export CMAKE_ARGS="${CMAKE_ARGS:-} -DNCCL_CAR_OTHER_NCCL_HOME=$(cat "$root/.deps-nccl-other-home")"
"$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure
"$root/tests/install/run-install-tests.sh"
# The shim's threads, fuzz and recovery scenarios under ThreadSanitizer (its own build, build-tsan/).
"$root/tests/tsan/run-tsan.sh"
