#!/usr/bin/env bash
# Runs the engine's GPU tests, the compute-sanitizer checks and the benchmark on a machine
# with an NVIDIA GPU. Usage: tests/gpu/run-gpu-tests.sh [BUILD_DIR]   (logs go to $OUT or ./gpu-logs)
set -uo pipefail
build=${1:-build}
logs=${OUT:-gpu-logs}
mkdir -p "$logs"
export CUDA_DEVICE_MAX_CONNECTIONS=32
tests="$build/tests/car_gpu_tests"
status=0

step() {  # step NAME TIMEOUT COMMAND...
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  tail -n 4 "$logs/$name.log"
  echo "== $name: exit $rc"
  [ $rc -eq 0 ] || status=1
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step long-runs 240 "$tests" "[long],[graph],[wrap]" --durations yes
for tool in memcheck racecheck synccheck; do
  step "sanitizer-$tool" 120 compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" "[sanitizer]"
done
step correctness 400 "$tests" "[correctness]" --durations yes
exit $status
