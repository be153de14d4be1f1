#!/usr/bin/env bash
# The multi-GPU runs of issue 5 on the GPUs of one machine (2, 4 or 8), NVLink multicast off:
#   topology (nvidia-smi topo -m, nccl-car doctor);
#   nccl-tests all_reduce_perf -c 1 through the library: one process per GPU (MPI), one
#   process with all GPUs (-g N), threads (-t N); half, bfloat16, float, -o all -d all,
#   eager and -G 10, 4 bytes to 64 MiB: #wrong must be 0 everywhere;
#   the PyTorch end-to-end program with one process per GPU;
#   the faults and life-cycles that need GPUs of their own (run-multi-gpu-faults.sh).
# Usage: tests/e2e/run-multi-gpu.sh BUILD_DIR ALL_REDUCE_PERF   (logs under $OUT or ./multi-gpu-logs)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(realpath "$1")
perf=$(realpath "$2")
logs=${OUT:-multi-gpu-logs}
mkdir -p "$logs"
source "$here/one_gpu_rig.sh"
lib="$build/shim/libnccl-car.so"
gpu_machine_begin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0

nvidia-smi topo -m >"$logs/topology.txt" 2>&1
NCCL_CAR_LIB="$lib" python3 "$here/../../tools/nccl-car" doctor >>"$logs/topology.txt" 2>&1
cat "$logs/topology.txt"

# check NAME COMMAND...: runs one all_reduce_perf configuration through the library.
check() {
  local name=$1
  shift
  local log="$logs/nt-$name.log"
  NCCL_CAR_DEBUG=INFO LD_PRELOAD="$lib" timeout 180 "$@" >"$log" 2>&1
  local rc=$?
  local wrong eligible taken
  wrong=$(awk '/^ +[0-9]+ +[0-9]+ /{w += $9 + $13} END {print w + 0}' "$log")
  eligible=$(grep -c "setup: eligible" "$log")
  taken=$(rig_taken_calls "$log")
  local status=PASS
  [ $rc -eq 0 ] && [ "$wrong" = 0 ] && grep -q "Out of bounds values : 0 OK" "$log" || { status=FAIL; failures=$((failures + 1)); }
  echo "$name: $status (rc $rc, #wrong $wrong, $eligible communicators eligible, $taken calls taken)"
}

sizes="-b 4 -e 64M -f 4 -c 1 -n 5 -w 2"
mpi="mpirun --allow-run-as-root --oversubscribe -np $gpus -x LD_PRELOAD -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x NCCL_CAR_DEBUG"
for dtype in half bfloat16 float; do
  for graph in 0 10; do
    check "mpi-$dtype-G$graph" $mpi "$perf" $sizes -d $dtype -G $graph -g 1
  done
done
check "mpi-all-ops-all-types" $mpi "$perf" $sizes -o all -d all -g 1
check "one-process-g$gpus-bfloat16" "$perf" $sizes -d bfloat16 -g $gpus
check "one-process-g$gpus-float-G10" "$perf" $sizes -d float -g $gpus -G 10
check "threads-t$gpus-float" "$perf" $sizes -d float -t $gpus
check "threads-t$gpus-half-G10" "$perf" $sizes -d half -t $gpus -G 10

log="$logs/torch-gpus$gpus.log"
E2E_ONE_GPU_PER_RANK=1 NCCL_CAR_DEBUG=INFO LD_PRELOAD="$lib" PYTHONUNBUFFERED=1 \
  timeout 300 torchrun --standalone --nproc-per-node "$gpus" "$here/torch_e2e.py" >"$log" 2>&1
rc=$?
passed=$(grep -c "^rank [0-9]*/$gpus: PASS" "$log")
echo "torch, one process per GPU: $( [ $rc = 0 ] && [ "$passed" = "$gpus" ] && echo PASS || echo FAIL ) (rc $rc, $passed/$gpus ranks passed, $(grep -c 'setup: eligible' "$log") communicators eligible)"
[ $rc = 0 ] && [ "$passed" = "$gpus" ] || failures=$((failures + 1))
OUT="$logs" "$here/run-multi-gpu-faults.sh" "$build" || failures=$((failures + 1))
echo "multi-gpu failures: $failures"
exit $(( failures > 0 ))
