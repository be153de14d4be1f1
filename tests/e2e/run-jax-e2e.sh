#!/usr/bin/env bash
# JAX psum across the GPUs of one machine (2 or more) through libnccl-car.so, one process
# (tests/e2e/jax_psum.py), NVLink multicast off:
#   auto:    `nccl-car run` must choose --mode audit (the script imports jax); results
#            right, communicators eligible, calls taken by our kernels;
#   preload: results right, and the summary says no communicator reached the library,
#            naming --mode audit.
# Needs JAX with CUDA: python3 -m pip install "jax[cuda12]" (or "jax[cuda13]").
# Usage: tests/e2e/run-jax-e2e.sh [BUILD_DIR]   (logs under $OUT or ./e2e-logs)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(realpath "${1:-build}")
logs=${OUT:-e2e-logs}
mkdir -p "$logs"
source "$here/one_gpu_rig.sh"
gpu_machine_begin
tool=(python3 "$here/../../tools/nccl-car" run --lib "$build/shim/libnccl-car.so")
if [ "$gpus" -lt 2 ]; then
  echo "jax: skipped ($gpus GPU visible, needs 2)"
  exit 0
fi
python3 -c "import jax" 2>/dev/null || { echo "jax: not installed (python3 -m pip install 'jax[cuda12]')"; exit 3; }
failures=0

log="$logs/jax-auto.log"
# JAX never destroys its communicators, so no "released:" line counts the calls: TRACE prints
# one line per call our kernels take.
NCCL_CAR_DEBUG=TRACE PYTHONUNBUFFERED=1 timeout 900 "${tool[@]}" -- python3 "$here/jax_psum.py" >"$log" 2>&1
rc=$?
taken=$(grep -c "NCCL-CAR TRACE rank [0-9]* all-reduce .* -> " "$log")
status=PASS
grep -q "mode audit" "$log" && grep -q "devices: PASS" "$log" && grep -q " eligible, " "$log" &&
  [ $rc = 0 ] && [ "${taken:-0}" -gt 0 ] || { status=FAIL; failures=$((failures + 1)); }
echo "jax psum, nccl-car run (auto): $status (rc $rc, $(grep -o 'jax psum .*' "$log"))"
grep "^nccl-car" "$log" | sed 's/^/  /'
grep -h "  taken\|  forwarded\|  not eligible\|WARN lines" "$log" | sed 's/^/  /'

log="$logs/jax-preload.log"
PYTHONUNBUFFERED=1 timeout 900 "${tool[@]}" --mode preload -- python3 "$here/jax_psum.py" >"$log" 2>&1
rc=$?
status=PASS
grep -q "devices: PASS" "$log" && grep -q "no communicator reached the library" "$log" &&
  grep -q "try: --mode audit" "$log" && [ $rc = 0 ] || { status=FAIL; failures=$((failures + 1)); }
echo "jax psum, nccl-car run --mode preload: $status (rc $rc; the summary must say it was not reached)"
grep -A2 "no communicator reached" "$log" | sed 's/^/  /'
echo "jax e2e failures: $failures"
exit $(( failures > 0 ))
