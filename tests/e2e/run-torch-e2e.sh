#!/usr/bin/env bash
# PyTorch end to end through libnccl-car.so on ONE GPU: tests/e2e/torch_e2e.py with 2, 4
# and 8 ranks under torchrun, MPS on, NCCL_CAR_DEBUG=INFO. Passes when every rank of every
# run passes and the log shows eligible communicators and calls taken by our kernels.
# Usage: tests/e2e/run-torch-e2e.sh [BUILD_DIR]   (logs under $OUT or ./e2e-logs)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(realpath "${1:-build}")
logs=${OUT:-e2e-logs}
mkdir -p "$logs"
source "$here/one_gpu_rig.sh"
rig_begin
failures=0
for n in ${E2E_RANKS:-2 4 8}; do
  log="$logs/torch-n$n.log"
  rig_restart_mps
  NCCL_CAR_DEBUG=INFO NCCL_CAR_MAX_BLOCKS=$(rig_max_blocks $n) LD_PRELOAD="$build/shim/libnccl-car.so" \
    PYTHONUNBUFFERED=1 timeout 400 torchrun --standalone --nproc-per-node $n "$here/torch_e2e.py" >"$log" 2>&1
  rc=$?
  passed=$(grep -c "^rank [0-9]*/$n: PASS" "$log")
  eligible=$(grep -c "setup: eligible" "$log")
  taken=$(rig_taken_calls "$log")
  status=PASS
  [ $rc -eq 0 ] && [ "$passed" = "$n" ] && [ "$taken" -gt 0 ] || { status=FAIL; failures=$((failures + 1)); }
  echo "torch $n ranks: $status (rc $rc, $passed/$n ranks passed, $eligible communicators eligible, $taken calls taken)"
  grep -h "phase .*FAIL\|WRONG" "$log" | head -5
done
# A peer that never joins: PyTorch's watchdog (5 s timeout) aborts the communicator and the
# job fails with its usual timeout error, well before our 60 s limit.
if [ -z "${E2E_SKIP_ABORT:-}" ]; then
  rig_restart_mps
  log="$logs/torch-abort.log"
  start=$(date +%s)
  # Error handling 1: the watchdog aborts the communicators (ncclCommAbort) and ends the
  # process. (PyTorch's default, 3, ends it without the abort.) No flight recorder and no
  # dump. PyTorch >= 2.8 sleeps 4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (default 15 s, so a
  # minute) between reporting the timeout and aborting, dump or not: make that 4 s.
  TORCH_NCCL_ASYNC_ERROR_HANDLING=1 TORCH_NCCL_DUMP_ON_TIMEOUT=0 TORCH_NCCL_TRACE_BUFFER_SIZE=0 TORCH_FR_BUFFER_SIZE=0 \
    TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=1000 \
    NCCL_CAR_DEBUG=INFO LD_PRELOAD="$build/shim/libnccl-car.so" PYTHONUNBUFFERED=1 \
    timeout 60 torchrun --standalone --nproc-per-node 2 "$here/torch_abort.py" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  timeout_error=$(grep -c -i "watchdog caught collective operation timeout\|timed out" "$log")
  # The watchdog's ncclCommAbort went through the library and stopped our kernel.
  told=$(grep -c "ncclCommAbort: our kernels told to stop" "$log")
  status=PASS
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 50 ] && [ "$timeout_error" -gt 0 ] && [ "$told" -gt 0 ] ||
    { status=FAIL; failures=$((failures + 1)); }
  echo "torch abort: $status (job ended after $took s with rc $rc; timeout error reported: $timeout_error lines;" \
    "our abort hook stopped kernels on $told communicator(s))"
fi
exit $(( failures > 0 ))
