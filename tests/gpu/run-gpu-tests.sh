#!/usr/bin/env bash
# Runs the engine's GPU tests and the compute-sanitizer checks on a machine with an NVIDIA
# GPU; with two or more GPUs the long sweeps run side by side on GPUs 0 and 1.
# Usage: tests/gpu/run-gpu-tests.sh [BUILD_DIR]   (logs go to $OUT or ./gpu-logs)
#   GPU_TESTS_SKIP="sanitizer-memcheck ops-pull" skips steps by name (the names printed).
# The ops-* steps run the matrix of every op and type ([ops], tests/gpu/test_ops.cc): the
# push kernels' part in one lane, the pull kernels' in the other, compute-sanitizer on its
# small share ([sanitizer-ops]); collectives the all-gather and reduce-scatter sweeps and the
# run that mixes them with all-reduces ([collectives], tests/gpu/test_collectives.cc). Every
# step runs Catch2 with -w NoTests: a step that matches no test fails.
set -uo pipefail
build=${1:-build}
logs=${OUT:-gpu-logs}
mkdir -p "$logs"
export CUDA_DEVICE_MAX_CONNECTIONS=32
tests="$build/tests/car_gpu_tests"
[ -x "$tests" ] || tests="$build/car_gpu_tests"
status=0
# The GPUs this script may use: CUDA_VISIBLE_DEVICES when set (nvidia-smi ignores it).
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  read -r -a visible <<<"${CUDA_VISIBLE_DEVICES//,/ }"
else
  read -r -a visible <<<"$(nvidia-smi -L | grep "^GPU" | awk -F'[ :]' '{printf "%s ", $2}')"
fi
first=${visible[0]:-0}
second=${visible[1]:-$first}

step() {  # step NAME GPU TIMEOUT COMMAND...
  local name=$1 gpu=$2 limit=$3
  shift 3
  case " ${GPU_TESTS_SKIP:-} " in *" $name "*) echo "== $name: skipped"; return ;; esac
  echo "== $name (GPU $gpu)"
  CUDA_VISIBLE_DEVICES=$gpu timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  # A renamed tag must not turn a step into a pass: -w NoTests fails a spec that matches
  # nothing, and so does this, whatever a Catch2 version makes of one part of "a,b".
  if [ $rc -eq 0 ] && grep -q "^No test cases matched" "$logs/$name.log"; then rc=2; fi
  tail -n 3 "$logs/$name.log"
  echo "== $name: exit $rc"
  [ $rc -eq 0 ] || status=1
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step launch-path "$first" 60 "$tests" "[launch-path]" -w NoTests
step release "$first" 300 "$tests" "[release],[leak]" -w NoTests
# Two lanes: each runs its steps in order; the lanes run at once when there are two GPUs.
lane0() {
  step special-unaligned-36 "$first" 150 "$tests" "[correctness]~[push]~[pull]" -w NoTests --durations yes
  step push-sweep "$first" 420 "$tests" "[push]" -w NoTests --durations yes
  step long-runs "$first" 300 "$tests" "[long],[graph],[wrap]" -w NoTests --durations yes
  step ops-push "$first" 300 "$tests" "[ops][1shot],[ops][2shot]" -w NoTests --durations yes
  step collectives "$first" 300 "$tests" "[collectives]" -w NoTests --durations yes
  step ops-thresholds-special "$first" 240 "$tests" "[ops]~[matrix]" -w NoTests --durations yes
  step invariance "$first" 240 "$tests" "[invariance]" -w NoTests --durations yes
}
lane1() {
  for tool in memcheck racecheck synccheck; do
    step "sanitizer-$tool" "$second" 150 compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" "[sanitizer]" -w NoTests
  done
  step pull-sweep-copy-engine "$second" 300 "$tests" "[pull][copy-engine]" -w NoTests --durations yes
  step pull-sweep-alternating "$second" 300 "$tests" "[pull][alternating]" -w NoTests --durations yes
  step ops-pull "$second" 300 "$tests" "[ops][1stage],[ops][2stage]" -w NoTests --durations yes
  # A call counts as hung after CAR_GPU_TEST_HANG_SECONDS; the sanitizers slow kernels a lot.
  for tool in memcheck racecheck synccheck; do
    step "sanitizer-ops-$tool" "$second" 240 env CAR_GPU_TEST_HANG_SECONDS=200 \
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" "[sanitizer-ops]" -w NoTests
  done
  for tool in memcheck racecheck synccheck; do
    step "sanitizer-collectives-$tool" "$second" 240 env CAR_GPU_TEST_HANG_SECONDS=200 \
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" "[sanitizer-collectives]" -w NoTests
  done
  step sanitizer-invariance-memcheck "$second" 300 env CAR_GPU_TEST_HANG_SECONDS=200 \
    compute-sanitizer --tool memcheck --error-exitcode 3 "$tests" "[sanitizer-invariance]" -w NoTests
}
if [ "$second" != "$first" ]; then
  lane1 >"$logs/lane1.out" 2>&1 &
  lane1_pid=$!
  lane0
  wait $lane1_pid || status=1
  cat "$logs/lane1.out"
  grep -q ": exit [1-9]" "$logs/lane1.out" && status=1
else
  lane0
  lane1
fi
exit $status
