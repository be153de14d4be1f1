#!/usr/bin/env bash
# A ctypes client (tests/e2e/ctypes_allreduce.py: NCCL from ctypes.CDLL and dlsym on that
# handle, as vLLM's PyNccl) through libnccl-car.so on ONE GPU, 2 and 4 processes under MPS:
#   audit-name   LD_AUDIT, ctypes.CDLL("libnccl.so.2")
#   audit-path   LD_AUDIT, ctypes.CDLL("<folder>/libnccl.so.2"), as JAX loads the NCCL wheel
#   dropin-name  build/shim/dropin first on LD_LIBRARY_PATH, ctypes.CDLL("libnccl.so.2")
#   tool-auto    each rank under `tools/nccl-car run` without --mode (it must choose audit)
#   preload      LD_PRELOAD only: must NOT reach the client (no communicator set up)
# A run passes when every rank prints PASS (exact sums), every rank's communicator is
# eligible and our kernels took calls (45 per rank: 5 sizes up to 8 MiB x 3 types x 3); the
# preload run passes when results are right and no communicator was set up.
# Usage: tests/e2e/run-ctypes-e2e.sh [BUILD_DIR]   (logs under $OUT or ./e2e-logs)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(realpath "${1:-build}")
logs=${OUT:-e2e-logs}
mkdir -p "$logs"
source "$here/one_gpu_rig.sh"
lib="$build/shim/libnccl-car.so"
rig_begin
nccl_dir=$(rig_nccl_lib_dir)
failures=0

# rank_command MODE RANK N ID_FILE: the command line and environment of one rank.
rank_command() {
  local mode=$1 rank=$2 n=$3 id=$4
  local client=(python3 "$here/ctypes_allreduce.py" "$rank" "$n" "$id")
  case $mode in
    audit-name) echo env LD_AUDIT="$build/shim/libnccl-car-audit.so" "${client[@]}" libnccl.so.2 ;;
    audit-path) echo env LD_AUDIT="$build/shim/libnccl-car-audit.so" "${client[@]}" "$nccl_dir/libnccl.so.2" ;;
    # The library finds the real NCCL itself, further down LD_LIBRARY_PATH.
    dropin-name) echo env LD_LIBRARY_PATH="$build/shim/dropin:$LD_LIBRARY_PATH" "${client[@]}" libnccl.so.2 ;;
    tool-auto) echo python3 "$here/../../tools/nccl-car" run --lib "$lib" -- "${client[@]}" libnccl.so.2 ;;
    preload) echo env LD_PRELOAD="$lib" "${client[@]}" libnccl.so.2 ;;
  esac
}

for n in ${E2E_RANKS:-2 4}; do
  blocks=$(rig_max_blocks $n)
  for mode in ${CTYPES_MODES:-audit-name audit-path dropin-name tool-auto preload}; do
    rig_restart_mps
    id_file=$(mktemp -u /tmp/nccl-car-ctypes-id.XXXXXX)
    pids=()
    for ((r = 0; r < n; r++)); do
      # shellcheck disable=SC2046 # rank_command prints a word list without spaces inside words
      NCCL_HOSTID="ctypes-rank-$r" NCCL_CAR_DEBUG=INFO NCCL_CAR_MAX_BLOCKS=$blocks PYTHONUNBUFFERED=1 \
        timeout 300 $(rank_command "$mode" "$r" "$n" "$id_file") >"$logs/ctypes-$mode-n$n-r$r.log" 2>&1 &
      pids+=($!)
    done
    ok=1
    for pid in "${pids[@]}"; do wait "$pid" || ok=0; done
    rm -f "$id_file"
    all=$(cat "$logs"/ctypes-$mode-n$n-r*.log)
    passed=$(grep -c "^rank [0-9]*/$n: PASS" <<<"$all")
    eligible=$(grep -c "setup: eligible" <<<"$all")
    taken=$(rig_taken_calls "$logs"/ctypes-$mode-n$n-r*.log)
    status=PASS
    if [ "$mode" = preload ]; then
      [ $ok = 1 ] && [ "$passed" = "$n" ] && [ "$(grep -c 'setup:' <<<"$all")" = 0 ] || status=FAIL
    else
      [ $ok = 1 ] && [ "$passed" = "$n" ] && [ "$eligible" = "$n" ] && [ "$taken" -gt 0 ] || status=FAIL
      [ "$mode" != tool-auto ] || grep -q "mode audit" <<<"$all" || status=FAIL
    fi
    [ $status = PASS ] || failures=$((failures + 1))
    echo "ctypes $mode $n ranks: $status (results right on $passed/$n ranks, $eligible eligible, $taken calls taken)"
    grep -h "WRONG\|failed\|NCCL-CAR WARN" "$logs"/ctypes-$mode-n$n-r*.log | head -5
  done
done
echo "ctypes e2e failures: $failures"
exit $(( failures > 0 ))
