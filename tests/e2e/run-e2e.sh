#!/usr/bin/env bash
# End-to-end runs of libnccl-car.so through the real NCCL on ONE GPU machine:
#   1. tests/e2e/allreduce_e2e with 2, 4 and 8 ranks (one process each, under MPS);
#   2. ncclCommAbort from a watchdog thread releases a rank waiting in our barrier;
#   3. nccl-tests all_reduce_perf -c 1 (MPI build) with 2, 4 and 8 ranks, half/bfloat16/float,
#      eager and -G, through the library: #wrong must be 0.
# Usage: tests/e2e/run-e2e.sh [BUILD_DIR] [ALL_REDUCE_PERF]   (logs under $OUT or ./e2e-logs)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(realpath "${1:-build}")
perf=${2:-}
logs=${OUT:-e2e-logs}
mkdir -p "$logs"
source "$here/one_gpu_rig.sh"
lib="$build/shim/libnccl-car.so"
rig_begin
failures=0

# --- 1. our own end-to-end program ----------------------------------------------------
for n in ${E2E_RANKS:-2 4 8}; do
  rig_restart_mps
  id_file=$(mktemp -u /tmp/nccl-car-e2e-id.XXXXXX)
  blocks=$(rig_max_blocks $n)
  pids=()
  for ((r = 0; r < n; r++)); do
    NCCL_HOSTID="e2e-rank-$r" NCCL_CAR_DEBUG=INFO NCCL_CAR_MAX_BLOCKS=$blocks LD_PRELOAD="$lib" \
      timeout 150 "$build/tests/allreduce_e2e" $r $n "$id_file" >"$logs/e2e-n$n-r$r.log" 2>&1 &
    pids+=($!)
  done
  ok=1
  for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
  rm -f "$id_file"
  eligible=$(cat "$logs"/e2e-n$n-r*.log | grep -c "setup: eligible")
  echo "e2e $n ranks: $( [ $ok = 1 ] && echo PASS || echo FAIL ), $eligible/$n ranks eligible"
  grep -h "checks," "$logs"/e2e-n$n-r*.log | sort
  grep -h "released:" "$logs"/e2e-n$n-r0.log | sed 's/^.*NCCL-CAR INFO /  rank0 /'
  [ $ok = 1 ] && [ "$eligible" = "$n" ] || failures=$((failures + 1))
done

# --- 1b. a setup fault on one rank: every rank forwards, results stay right -------------
for fault in ${E2E_FAULTS:-ipc-open no-buffers}; do
  rig_restart_mps
  id_file=$(mktemp -u /tmp/nccl-car-fault-id.XXXXXX)
  pids=()
  for r in 0 1; do
    fault_env=""
    [ $r = 1 ] && fault_env=$fault
    NCCL_HOSTID="fault-rank-$r" NCCL_CAR_DEBUG=INFO NCCL_CAR_TEST_FAULT=$fault_env LD_PRELOAD="$lib" \
      timeout 150 "$build/tests/allreduce_e2e" $r 2 "$id_file" >"$logs/fault-$fault-r$r.log" 2>&1 &
    pids+=($!)
  done
  ok=1
  for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
  rm -f "$id_file"
  forwarding=$(cat "$logs"/fault-$fault-r*.log | grep -c "setup: not eligible")
  warns=$(cat "$logs"/fault-$fault-r*.log | grep -c "NCCL-CAR WARN")
  status=PASS
  [ $ok = 1 ] && [ "$forwarding" = 2 ] && [ "$warns" -ge 1 ] || { status=FAIL; failures=$((failures + 1)); }
  echo "fault $fault on rank 1: $status (results right: $ok, $forwarding/2 ranks forward, $warns WARN)"
  grep -h "setup: not eligible" "$logs"/fault-$fault-r0.log | sed 's/^.*NCCL-CAR INFO /  rank0 /'
done

# --- 2. ncclCommAbort releases a rank spinning in our barrier --------------------------
if [ -z "${E2E_SKIP_ABORT:-}" ]; then
  rig_restart_mps
  id_file=$(mktemp -u /tmp/nccl-car-abort-id.XXXXXX)
  for r in 0 1; do
    NCCL_HOSTID="abort-rank-$r" NCCL_CAR_DEBUG=INFO LD_PRELOAD="$lib" \
      timeout 60 "$build/tests/abort_e2e" $r "$id_file" >"$logs/abort-r$r.log" 2>&1 &
    pids[$r]=$!
  done
  wait ${pids[0]}; abort_rc=$?
  wait ${pids[1]}
  rm -f "$id_file"
  echo "abort: $( [ $abort_rc = 0 ] && echo PASS || echo "FAIL (rc $abort_rc)" ): $(grep -h "returned" "$logs/abort-r0.log")"
  [ $abort_rc = 0 ] || failures=$((failures + 1))
fi

# --- 3. nccl-tests all_reduce_perf -c 1 through the library ----------------------------
if [ -n "$perf" ] && [ -x "$perf" ]; then
  wrapper="$logs/rank-wrapper.sh"
  cat >"$wrapper" <<'WRAP'
#!/usr/bin/env bash
export NCCL_HOSTID="nt-rank-${OMPI_COMM_WORLD_RANK:-0}"
exec "$@"
WRAP
  chmod +x "$wrapper"
  for n in ${E2E_RANKS:-2 4 8}; do
    blocks=$(rig_max_blocks $n)
    for dtype in ${NT_DTYPES:-half bfloat16 float}; do
      for graph in ${NT_GRAPH:-0 10}; do
        log="$logs/nt-n$n-$dtype-G$graph.log"
        rig_restart_mps
        timeout 150 mpirun --allow-run-as-root --oversubscribe -np $n \
          -x LD_PRELOAD="$lib" -x LD_LIBRARY_PATH -x NCCL_SOCKET_IFNAME -x NCCL_NVLS_ENABLE \
          -x CUDA_MPS_PIPE_DIRECTORY -x NCCL_TESTS_DEVICE=0 \
          -x NCCL_CAR_DEBUG=INFO -x NCCL_CAR_MAX_BLOCKS=$blocks \
          "$wrapper" "$perf" -b 16 -e 16M -f 4 -d $dtype -c 1 -n 5 -w 2 -G $graph >"$log" 2>&1
        rc=$?
        wrong=$(awk '/^ +[0-9]+ +[0-9]+ /{w += $9 + $13} END {print w + 0}' "$log")
        eligible=$(grep -c "setup: eligible" "$log")
        taken=$(rig_taken_calls "$log")
        status=PASS
        [ $rc -eq 0 ] && [ "$wrong" = 0 ] && [ "$eligible" -ge "$n" ] || { status=FAIL; failures=$((failures + 1)); }
        echo "nccl-tests $n ranks $dtype -G $graph: $status (rc $rc, #wrong $wrong, $eligible eligible, $taken calls taken)"
      done
    done
  done
else
  echo "nccl-tests: skipped (no all_reduce_perf given)"
fi
echo "e2e failures: $failures"
exit $(( failures > 0 ))
