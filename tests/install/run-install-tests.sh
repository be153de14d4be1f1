#!/usr/bin/env bash
# The two ways a user installs nccl-car, checked from a built tree (scripts/build-and-test.sh
# runs this after ctest; no GPU needed):
#   cmake --install   into a new prefix P. P/bin/nccl-car, run from /, must use
#                     P/lib/libnccl-car.so and what the install put beside it.
#   the wheel         `pip wheel` of this source through pyproject.toml, reusing the build
#                     folder (-Cbuild-dir) so that nothing is compiled twice, installed with
#                     pip into a new virtual environment. Its nccl-car, run from /, must use
#                     the library in that environment; then the shim tests (car_shim_tests)
#                     run against that installed library, audit module and front.
# For each tool: doctor finds the files, run preloads the library into a scripted NCCL
# program over the shim tests' stand-in NCCL, bench finds the installed benchmark.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
here=$root/tests/install
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS

# The tool with nothing of this environment that changes what it picks.
clean() { (cd / && env -u LD_PRELOAD -u LD_AUDIT -u NCCL_CAR_LIB -u NCCL_CAR_QUERY "$@"); }

check_tool() {
  local tool=$1 prefix=$2
  local library=$prefix/lib/libnccl-car.so
  clean "$tool" doctor --json >"$work/doctor.json"
  "$python" "$here/check_doctor.py" "$work/doctor.json" "$library" "$prefix/lib/libnccl-car-audit.so" \
    "$prefix/lib/nccl-car/front/libnccl.so.2" "$prefix/bin/nccl_car_query"

  local preloaded
  preloaded=$(clean "$tool" run --mode preload -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
  if [ "$preloaded" != "$library" ]; then
    echo "install: $tool run preloads '$preloaded', not $library" >&2
    exit 1
  fi
  # No GPU needed: without one every communicator is set up as not eligible and forwards.
  if ! clean env STANDIN_NCCL_LOG="$work/calls.log" CUDA_VISIBLE_DEVICES= \
       "$tool" run -- "$build/tests/shim_driver" lifecycle >"$work/run.out" 2>"$work/run.err" ||
     ! grep -q "setup: not eligible:" "$work/run.err" || ! grep -q "released:" "$work/run.err"; then
    echo "install: $tool run -- shim_driver lifecycle did not reach the library:" >&2
    cat "$work/run.out" "$work/run.err" >&2
    exit 1
  fi
  echo "install: $tool run: the library set up and released the driver's communicators"

  # bench stops at the GPU count, after it found its program (else: "no benchmark program").
  if [ -x "$prefix/bin/car_nccl_bench" ]; then
    set +e
    clean env CUDA_VISIBLE_DEVICES= "$tool" bench >"$work/bench.out" 2>"$work/bench.err"
    local rc=$?
    set -e
    if [ "$rc" -ne 3 ] || ! grep -q "car_nccl_bench needs 2 or more GPUs; 0 visible" "$work/bench.err"; then
      echo "install: $tool bench (exit $rc) did not find $prefix/bin/car_nccl_bench:" >&2
      cat "$work/bench.err" >&2
      exit 1
    fi
    echo "install: $tool bench: uses $prefix/bin/car_nccl_bench"
  fi
}

# 1. cmake --install
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for file in lib/libnccl-car.so lib/libnccl-car-audit.so lib/nccl-car/front/libnccl.so.2 bin/nccl-car \
            bin/nccl_car_query lib/nccl-car/python/nccl_car_cli/main.py share/doc/nccl-car/README.md; do
  if [ ! -e "$prefix/$file" ]; then
    echo "install: cmake --install put no $file under the prefix:" >&2
    cat "$work/install.log" >&2
    exit 1
  fi
done
check_tool "$prefix/bin/nccl-car" "$prefix"
echo "install: cmake --install --prefix P: P/bin/nccl-car uses P/lib/libnccl-car.so ($((SECONDS - start)) s)"

# 2. the wheel
wheel_start=$SECONDS
# scikit-build-core clears a build folder's CMake cache when its build environment differs
# from the last one's, as every isolated pip build's does: that cache is scripts/build.sh's,
# so it is told of no earlier build.
rm -f "$build/.skbuild-info.json"
if ! "$python" -m pip wheel --no-deps --wheel-dir "$work/dist" -Cbuild-dir="$build" \
     -Ccmake.define.NCCL_CAR_BUILD_TESTS=ON "$root" >"$work/wheel.log" 2>&1; then
  cat "$work/wheel.log" >&2
  exit 1
fi
wheel=$(ls "$work"/dist/nccl_car-*.whl)
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-deps --no-index "$wheel"
package=$("$work/venv/bin/python" -c 'import nccl_car_cli, os; print(os.path.dirname(nccl_car_cli.__file__))')
check_tool "$work/venv/bin/nccl-car" "$package"
echo "install: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) in a new virtual environment:" \
     "its nccl-car uses $package/lib/libnccl-car.so ($((SECONDS - wheel_start)) s)"

CAR_TEST_SHIM_LIBRARY=$package/lib/libnccl-car.so CAR_TEST_AUDIT_LIBRARY=$package/lib/libnccl-car-audit.so \
  "$build/tests/car_shim_tests"
echo "install: the shim tests passed against the wheel's library ($((SECONDS - start)) s in all)"
