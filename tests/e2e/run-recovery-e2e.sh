#!/usr/bin/env bash
# NCCL's recovery paths and the release of our buffers, through the real NCCL:
#   1. tests/e2e/recovery_e2e, every scenario: two processes on GPU 0 (MPS, one NCCL_HOSTID
#      each, as tests/e2e/one_gpu_rig.sh sets up); rank 0's log must show what our side did;
#   2. tests/e2e/release_e2e processes: a peer 1 s and 4 s late at destroy, and one joining
#      an aborted all-reduce late; rank 0's log must show its block waited for, kept, freed;
#   3. with 2 or more GPUs: release_e2e initall (one process, ncclCommInitAll) and
#      release_e2e devices (2 processes driving GPUs 0 and 1 each, as nccl-tests -g 2 under
#      MPI: not ours, every communicator must forward and stay right).
# Takes about 4 minutes on one GPU (destroy-alone waits out our 30 s bound).
# Usage: tests/e2e/run-recovery-e2e.sh BUILD_DIR   (logs under $OUT or ./recovery-logs)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(realpath "${1:-build}")
logs=${OUT:-recovery-logs}
mkdir -p "$logs"
source "$here/one_gpu_rig.sh"
lib="$build/shim/libnccl-car.so"
gpu_machine_begin
rig_begin
blocks2=$(rig_max_blocks 2)  # both ranks' blocks resident on one GPU at once
failures=0

# two_ranks NAME LIMIT PROGRAM MODE: "PROGRAM MODE r ID_FILE" for r = 0, 1 on GPU 0, each
# with its own NCCL_HOSTID; RANK0_ENV is added to rank 0's environment. Sets rc0 and rc1.
two_ranks() {
  local name=$1 limit=$2 program=$3 mode=$4 id_file pids=()
  rig_restart_mps
  id_file=$(mktemp -u /tmp/nccl-car-$name-id.XXXXXX)
  for r in 0 1; do
    local extra=""
    [ $r = 0 ] && extra=${RANK0_ENV:-}
    # shellcheck disable=SC2086 # extra is a list of NAME=value words
    env $extra NCCL_HOSTID="$name-rank-$r" NCCL_CAR_DEBUG=INFO NCCL_CAR_MAX_BLOCKS="$blocks2" LD_PRELOAD="$lib" \
      timeout "$limit" "$program" "$mode" $r "$id_file" >"$logs/$name-r$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
  rm -f "$id_file"
}

# What rank 0's log must hold after each scenario: our side's own account of it.
evidence() {
  case $1 in
    shrink-abort) echo "ncclCommShrink(NCCL_SHRINK_ABORT): our kernels told to stop" ;;
    revoke) echo "(262144 bytes) forwarded 1 (ineligible-comm=1)" ;;
    finalize-abort|destroy-abort) echo "our kernels told to stop (an abort came while we waited)" ;;
    destroy-alone) echo "did not finish within 30 s of ncclCommDestroy" ;;
    setup-abort) echo "ncclAllReduce while another thread" ;;
    ineligible-abort) echo "ncclCommAbort: our kernels told to stop" ;;
    async-error) echo "NCCL reports the communicator broken" ;;
  esac
}

# --- 1. recovery paths ------------------------------------------------------------------
for scenario in ${RECOVERY_SCENARIOS:-shrink-abort revoke finalize-abort destroy-abort setup-abort ineligible-abort async-error destroy-alone}; do
  RANK0_ENV=""
  [ "$scenario" = ineligible-abort ] && RANK0_ENV="NCCL_CAR_TEST_FAULT=launch-error"
  limit=60
  [ "$scenario" = destroy-alone ] && limit=120
  two_ranks "$scenario" $limit "$build/tests/recovery_e2e" "$scenario"
  line=$(grep -h "$scenario:" "$logs/$scenario-r0.log" | head -1)
  if [ $rc0 = 77 ]; then
    status=SKIPPED
  elif [ $rc0 = 0 ] && [ $rc1 = 0 ] && grep -qF "$(evidence "$scenario")" "$logs/$scenario-r0.log"; then
    status=PASS
  else
    status="FAIL (rc $rc0/$rc1)"
    failures=$((failures + 1))
  fi
  echo "recovery $scenario: $status: ${line:-no verdict line}"
done

# --- 2. release order between processes ---------------------------------------------------
if [ -z "${SKIP_RELEASE:-}" ]; then
  RANK0_ENV=""
  two_ranks release 90 "$build/tests/release_e2e" processes
  log="$logs/release-r0.log"
  waited=$(grep -c "buffers freed once every peer had let go of them" "$log")
  kept=$(grep -c "buffers kept allocated: 1 peer rank(s) still map them" "$log")
  freed=$(grep -c "buffers kept at release freed" "$log")
  status=PASS
  [ $rc0 = 0 ] && [ $rc1 = 0 ] && [ "$waited" -ge 1 ] && [ "$kept" -ge 2 ] && [ "$freed" -ge 2 ] ||
    { status="FAIL (rc $rc0/$rc1)"; failures=$((failures + 1)); }
  echo "release between processes: $status (rank 0: waited for its peer $waited, kept $kept, freed later $freed;" \
    "expected >= 1, 2, 2)"
  grep -h "PASS\|FAIL" "$logs"/release-r*.log | sed 's/^/  /'
fi

# --- 3. several GPUs ----------------------------------------------------------------------
if [ "$gpus" -ge 2 ]; then
  n=$(( gpus > 8 ? 8 : gpus ))
  rig_restart_mps
  NCCL_CAR_DEBUG=INFO LD_PRELOAD="$lib" timeout 120 "$build/tests/release_e2e" initall $n >"$logs/initall.log" 2>&1
  rc=$?
  kept=$(grep -c "buffers kept allocated" "$logs/initall.log")
  freed=$(grep -c "buffers kept at release freed" "$logs/initall.log")
  status=PASS
  [ $rc = 0 ] && [ "$kept" -ge $((2 * (n - 1))) ] && [ "$freed" -ge $((2 * (n - 1))) ] ||
    { status="FAIL (rc $rc)"; failures=$((failures + 1)); }
  echo "release in one process ($n GPUs, ncclCommInitAll): $status (kept $kept, freed later $freed;" \
    "expected >= $((2 * (n - 1))) each)"
  grep -h "PASS\|FAIL" "$logs/initall.log" | sed 's/^/  /'

  rig_restart_mps
  blocks=$(rig_max_blocks 2)
  id_file=$(mktemp -u /tmp/nccl-car-devices-id.XXXXXX)
  pids=()
  for p in 0 1; do
    NCCL_HOSTID="devices-process-$p" NCCL_CAR_DEBUG=INFO NCCL_CAR_MAX_BLOCKS=$blocks LD_PRELOAD="$lib" \
      timeout 300 "$build/tests/release_e2e" devices $p 2 "$id_file" "${CYCLES:-100}" 0,1 \
      >"$logs/devices-p$p.log" 2>&1 &
    pids+=($!)
  done
  ok=1
  for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
  rm -f "$id_file"
  # Processes driving several GPUs with peers in other processes are not ours (the verdict
  # says why): every cycle must forward, stay right and leave nothing behind.
  eligible=$(cat "$logs"/devices-p*.log | grep -c "setup: eligible")
  refused=$(cat "$logs"/devices-p*.log | grep -c "setup: not eligible: the process of rank [0-9]* drives several GPUs")
  status=PASS
  [ $ok = 1 ] && [ "$eligible" = 0 ] && [ "$refused" -gt 4 ] || { status=FAIL; failures=$((failures + 1)); }
  echo "-g 2 in 2 processes: $status ($eligible eligible set-ups, $refused refused as several GPUs per process)"
  grep -h "PASS\|FAIL" "$logs"/devices-p*.log | sed 's/^/  /'
else
  echo "release in one process, -g 2: SKIPPED (needs 2 GPUs, found $gpus)"
fi
echo "recovery e2e failures: $failures"
exit $(( failures > 0 ))
