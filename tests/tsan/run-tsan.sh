#!/usr/bin/env bash
# ThreadSanitizer check of the shim (CI runs it from scripts/build-and-test.sh, after ctest):
# builds libnccl-car.so, the stand-in libnccl.so.2 and the scripted driver with
# -fsanitize=thread into build-tsan/ (or $TSAN_BUILD_DIR; settings in tsan.cmake), then
# runs the driver's threads, fuzz, recovery and guest scenarios with the instrumented shim preloaded,
# and ranks as threads (car_multi_rank_driver) with the instrumented fake-CUDA library. Any
# TSan report ends a run at once with exit code 66 and fails this script, printing it.
# The scenarios' results themselves are checked by the shim tests (ctest shim_tests).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${TSAN_BUILD_DIR:-$root/build-tsan}
here=$root/tests/tsan
start=$SECONDS

cmake_args=(-S "$root" -B "$build" -G Ninja -C "$here/tsan.cmake")
[ -f "$root/.deps-nccl-home" ] && cmake_args+=(-DNCCL_HOME="$(cat "$root/.deps-nccl-home")")
mkdir -p "$build"
cmake "${cmake_args[@]}" >"$build/tsan-configure.log" 2>&1 || { cat "$build/tsan-configure.log"; exit 1; }
# Only what the runs need: no GPU tests, no Catch2 executables.
cmake --build "$build" --parallel --target nccl-car shim_driver car_standin_nccl nccl-car-fake-cuda car_multi_rank_driver
built=$SECONDS
shim=$build/shim/libnccl-car.so
driver=$build/tests/shim_driver
fake_cuda_shim=$build/tests/fake-cuda/libnccl-car.so
multi_rank_driver=$build/tests/car_multi_rank_driver

tsan_options="halt_on_error=1:exitcode=66:second_deadlock_stack=1"
for library in "$shim" "$fake_cuda_shim"; do
  if ! nm -D --undefined-only "$library" | grep -c __tsan_func_entry >/dev/null; then  # not -q: pipefail
    echo "tsan: $library is not instrumented (check $here/tsan.cmake)" >&2
    exit 1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The canary: a real race must be reported. Kernels with more ASLR bits than this TSan
# knows make it abort at start ("unexpected memory mapping"); run without ASLR then.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
"${cxx:-c++}" -std=c++17 -fsanitize=thread -g -O1 -pthread "$here/race_canary.cc" -o "$build/race_canary"
runner=()
canary() {
  set +e
  TSAN_OPTIONS=$tsan_options "${runner[@]}" "$build/race_canary" >/dev/null 2>"$work/canary.err"
  canary_rc=$?
  set -e
}
canary
if [ "$canary_rc" -ne 66 ] && grep -q "unexpected memory mapping" "$work/canary.err" &&
   setarch "$(uname -m)" -R true 2>/dev/null; then
  runner=(setarch "$(uname -m)" -R)
  canary
fi
if [ "$canary_rc" -ne 66 ] || ! grep -q "WARNING: ThreadSanitizer: data race" "$work/canary.err"; then
  echo "tsan: ThreadSanitizer does not work here: the canary race exited $canary_rc without a report" >&2
  head -20 "$work/canary.err" >&2
  exit 1
fi

# name|driver arguments|extra environment (space-separated NAME=value)|a line the shim must
# print (default: a released: summary), proof that it was active
scenarios=(
  "threads|threads 8 50|"
  "fuzz-1|fuzz 1 2000|"
  "fuzz-5-nonblocking|fuzz 5 2000|NCCL_COMM_BLOCKING=0"
  "fuzz-6-threads|fuzz 6 1000 4|"
  "fuzz-7-threads-nonblocking|fuzz 7 1000 4|NCCL_COMM_BLOCKING=0"
  "abort-in-creation|stop-in-setup ncclCommAbort|STANDIN_NCCL_ASYNC_POLLS=1000000000|real NCCL found"
  "destroy-in-creation|stop-in-setup ncclCommDestroy|STANDIN_NCCL_ASYNC_POLLS=1000000000|real NCCL found"
  "abort-in-forward|abort-in-forward|STANDIN_NCCL_DELAY_MS_ncclAllReduce=1000"
  "address-reuse|address-reuse pnccl|STANDIN_NCCL_REUSE_ADDRESSES=1|gave this communicator's address"
)
# run_scenario NAME PROGRAM LIBRARY "ARGS" "EXTRA" ERR_LINE OUT_LINE: one run with LIBRARY
# preloaded; it must exit 0, print OUT_LINE as a whole line and ERR_LINE somewhere in stderr.
run_scenario() {
  local name=$1 program=$2 library=$3 args=$4 extra=$5 expect_err=$6 expect_out=$7 rc
  rm -f "$work/calls.log"
  set +e
  # shellcheck disable=SC2086 # args and extra are word lists
  env -i PATH=/usr/bin:/bin TSAN_OPTIONS="$tsan_options" STANDIN_NCCL_LOG="$work/calls.log" NCCL_CAR_DEBUG=INFO \
    LD_PRELOAD="$library" $extra "${runner[@]}" "$program" $args >"$work/out" 2>"$work/err"
  rc=$?
  set -e
  if [ "$rc" -eq 66 ] || grep -q "ThreadSanitizer" "$work/err"; then
    echo "tsan: scenario $name: ThreadSanitizer reported (exit $rc):" >&2
    grep -v "NCCL-CAR" "$work/err" | head -200 >&2
    exit 1
  fi
  if [ "$rc" -ne 0 ] || ! grep -qx "$expect_out" "$work/out" || ! grep -q -- "$expect_err" "$work/err"; then
    echo "tsan: scenario $name failed (exit $rc) or the shim was not active:" >&2
    tail -20 "$work/out" >&2
    head -50 "$work/err" >&2
    exit 1
  fi
  echo "tsan: $name ($(basename "$program") $args${extra:+ with $extra}): no race reported"
}

for scenario in "${scenarios[@]}"; do
  IFS='|' read -r name args extra expect <<<"$scenario"
  run_scenario "$name" "$driver" "$shim" "$args" "$extra" "${expect:- released: }" done
done

# Ranks as threads over the stand-in's exchange, with the library over the fake CUDA runtime
# (tests/fake_cuda/): set-up (its worker thread too), engines, launches and releases race
# between real ranks, over the stand-in's model of NCCL 2.28.9's nonblocking group jobs
# (STANDIN_NCCL_ASYNC_JOBS=1: the driver waits for every call in progress, as NCCL asks).
# name|ranks calls communicators [mode]|extra environment|what the log must show (by
# default: calls taken)
multi_rank_scenarios=(
  "multi-rank-2|2 2000 1|"
  "multi-rank-4-two-comms|4 1000 2|"
  "multi-rank-4-two-comms-nonblocking|4 1000 2|NCCL_COMM_BLOCKING=0"
  "multi-rank-4-opposite-order|4 200 2 opposite-order|NCCL_COMM_BLOCKING=0"
  "multi-rank-8-two-comms|8 500 2|"
  "multi-rank-3-peer-never-joins|3 50 1 peer-never-joins|NCCL_CAR_SETUP_TIMEOUT_MS=1000|did not complete within"
  "multi-rank-3-peer-never-joins-nonblocking|3 50 1 peer-never-joins|NCCL_CAR_SETUP_TIMEOUT_MS=1000 NCCL_COMM_BLOCKING=0|did not complete within"
  "multi-rank-5-end-in-setup|5 10 2 end-in-setup|NCCL_COMM_BLOCKING=0|during set-up"
  # Issue 44's: the process ends with set-ups still in the background; a rank whose first call
  # NCCL refuses (not yet created) and that makes it again; a set-up that throws on the worker,
  # then a second communicator of the same ranks; blocks of another size meeting kept memory;
  # a rank that gives up before the agreement while the worker's let-go is slow; a rank whose
  # record-filling throws, which must still send its record.
  "multi-rank-3-exit-in-setup|3 10 2 exit-in-setup|NCCL_COMM_BLOCKING=0|real NCCL found"
  "multi-rank-2-early-call|2 200 1 early-call|NCCL_COMM_BLOCKING=0"
  "multi-rank-3-advance-throw|3 200 2 second-comm|NCCL_CAR_TEST_FAULT=advance-throw@1 NCCL_CAR_SETUP_TIMEOUT_MS=3000|advance-throw"
  "multi-rank-2-grow-block|2 300 2 sequential|NCCL_CAR_TEST_FAULT=grow-block"
  "multi-rank-2-end-at-once-slow-launcher|2 10 1 end-at-once|NCCL_COMM_BLOCKING=0 NCCL_CAR_TEST_FAULT=slow-launcher@1|released during set-up"
  "multi-rank-2-give-up-slow-retire|2 300 1|NCCL_COMM_BLOCKING=0 NCCL_CAR_TEST_FAULT=give-up-before-agreement@1,slow-retire@1|give-up-before-agreement"
  "multi-rank-2-record-throw|2 200 1|NCCL_CAR_TEST_FAULT=record-throw@1|failed before the set-up's exchange"
)
for scenario in "${multi_rank_scenarios[@]}"; do
  IFS='|' read -r name args extra expect <<<"$scenario"
  run_scenario "$name" "$multi_rank_driver" "$fake_cuda_shim" "$args" "STANDIN_NCCL_EXCHANGE=1 STANDIN_NCCL_ASYNC_JOBS=1 $extra" \
    "${expect:- released: taken 1shot=[1-9]}" "multi-rank failures=0"
  # The stand-ins' watch on the rules (tests/fake_cuda/README.md) must have seen none broken.
  if ! grep -qx "standin violations=0" "$work/out" || ! grep -qx "fake-cuda: violations=0" "$work/err"; then
    echo "tsan: scenario $name broke a rule the stand-ins watch:" >&2
    grep -E "VIOLATION|violations=" "$work/out" "$work/err" | head -20 >&2
    exit 1
  fi
done
echo "tsan: $((${#scenarios[@]} + ${#multi_rank_scenarios[@]})) scenarios, no race reported (build $((built - start)) s, runs $((SECONDS - built)) s)"
