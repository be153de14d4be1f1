#!/usr/bin/env bash
# Faults and leaks of issue 6 that need real GPUs of their own (not the one-GPU rig), one
# process per GPU, through the real NCCL:
#   1. NVML missing on one rank (NCCL_CAR_TEST_FAULT=no-nvml) with 3 or more GPUs: NVLink
#      cannot be confirmed, so every rank forwards, results stay right, a WARN says why;
#   2. CYCLES (default 1000) communicator life-cycles (split, all-reduce taken by our
#      kernel, destroy) with real IPC peers on 2 GPUs (with one GPU: 2 processes on it,
#      under MPS, as on the one-GPU rig): device memory, open files and mappings end where
#      they started (tests/e2e/cycles_e2e.cc).
# Usage: tests/e2e/run-multi-gpu-faults.sh BUILD_DIR   (logs under $OUT or ./multi-gpu-logs)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(realpath "$1")
logs=${OUT:-multi-gpu-logs}
mkdir -p "$logs"
source "$here/one_gpu_rig.sh"
lib="$build/shim/libnccl-car.so"
gpu_machine_begin
failures=0

# run_ranks NAME N PROGRAM ARGS...: rank r runs "PROGRAM r N ID_FILE ARGS... DEVICE" on GPU r
# (on GPU 0 with its own NCCL_HOSTID when ONE_GPU=1); the per-rank environment comes from
# RANK_ENV_<r> when set. Returns 0 if every rank did.
run_ranks() {
  local name=$1 n=$2 program=$3
  shift 3
  local id_file pids=() ok=0
  id_file=$(mktemp -u /tmp/nccl-car-$name-id.XXXXXX)
  for ((r = 0; r < n; r++)); do
    local extra_env="RANK_ENV_$r" device=$r rig_env=""
    [ "${ONE_GPU:-0}" = 1 ] && device=0 rig_env="NCCL_HOSTID=$name-rank-$r"
    env ${!extra_env:-} $rig_env NCCL_CAR_DEBUG=INFO LD_PRELOAD="$lib" \
      timeout "${RUN_LIMIT:-300}" "$program" $r $n "$id_file" "$@" $device >"$logs/$name-r$r.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || ok=1; done
  rm -f "$id_file"
  return $ok
}

# --- 1. NVML missing on one rank --------------------------------------------------------
if [ "$gpus" -ge 3 ]; then
  n=$(( gpus > 4 ? 4 : gpus ))
  RANK_ENV_1="NCCL_CAR_TEST_FAULT=no-nvml" RUN_LIMIT=150 run_ranks no-nvml $n "$build/tests/allreduce_e2e"
  rc=$?
  forwarding=$(cat "$logs"/no-nvml-r*.log | grep -c "setup: not eligible")
  warns=$(cat "$logs"/no-nvml-r*.log | grep -c "NCCL-CAR WARN.*cannot load NVML")
  status=PASS
  [ $rc = 0 ] && [ "$forwarding" = "$n" ] && [ "$warns" -ge 1 ] || { status=FAIL; failures=$((failures + 1)); }
  echo "no-nvml on rank 1 of $n GPUs: $status (results right: $([ $rc = 0 ] && echo yes || echo no)," \
    "$forwarding/$n ranks forward, $warns WARN naming NVML)"
  grep -h "NCCL-CAR WARN" "$logs"/no-nvml-r*.log | head -2 | sed 's/^.*NCCL-CAR /  /'
else
  echo "no-nvml: SKIPPED (needs 3 or more GPUs, found $gpus)"
fi

# --- 2. life-cycles with real IPC peers ---------------------------------------------------
cycles=${CYCLES:-1000}
if [ "$gpus" -ge 2 ]; then
  run_ranks cycles 2 "$build/tests/cycles_e2e" "$cycles"
  rc=$?
else
  rig_begin
  rig_restart_mps
  ONE_GPU=1 run_ranks cycles 2 "$build/tests/cycles_e2e" "$cycles"
  rc=$?
  rig_stop_mps
fi
where=$([ "$gpus" -ge 2 ] && echo "2 GPUs" || echo "1 GPU (2 processes, MPS)")
# Every cycle's child communicator was set up by us and its all-reduce taken by our kernel.
taken=$(cat "$logs"/cycles-r*.log | grep -cE "released: taken (1shot=1 2shot=0|1shot=0 2shot=1) 1stage=0 2stage=0 ")
status=PASS
[ $rc = 0 ] && [ "$taken" = $(( 2 * (cycles + 5) )) ] || { status=FAIL; failures=$((failures + 1)); }
echo "cycles on $where: $status ($taken of $(( 2 * (cycles + 5) )) child communicators took their all-reduce)"
grep -h "cycles" "$logs"/cycles-r*.log | tail -n 4 | sed 's/^/  /'
echo "multi-gpu fault failures: $failures"
exit $(( failures > 0 ))
