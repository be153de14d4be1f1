#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) over the one-GPU end-to-end run: two
# processes of tests/e2e/allreduce_e2e on one GPU through the real NCCL, each under the
# tool, sizes up to E2E_MAX_BYTES (default 64 KiB: ours and forwarded calls, eager and
# graph, in and out of place). Passes when both ranks' checks pass and every tool reports
# 0 errors. Under MPS, as the rig's other runs.
# memcheck runs with --report-api-errors no: NCCL 2.28.9's initialisation asks for the
# attributes of its kernels for other architectures and gets cudaErrorNoKernelImageForDevice
# by design (8 such reports per process, all inside ncclInitKernelsForDevice). Our own CUDA
# API errors are returned and logged by the library; memcheck's job here is device accesses.
# Usage: tests/e2e/run-e2e-sanitizer.sh [BUILD_DIR]   (logs under $OUT or ./e2e-logs)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(realpath "${1:-build}")
logs=${OUT:-e2e-logs}
mkdir -p "$logs"
source "$here/one_gpu_rig.sh"
lib="$build/shim/libnccl-car.so"
rig_begin
failures=0
for tool in ${SANITIZER_TOOLS:-memcheck racecheck synccheck}; do
  extra=""
  [ "$tool" = memcheck ] && extra="--report-api-errors no"
  rig_restart_mps
  id_file=$(mktemp -u /tmp/nccl-car-sanitizer-id.XXXXXX)
  pids=()
  for r in 0 1; do
    # The tool's own process loads the preloaded library too, harmlessly: it calls no NCCL.
    NCCL_HOSTID="sanitizer-rank-$r" NCCL_CAR_DEBUG=INFO NCCL_CAR_MAX_BLOCKS=4 E2E_MAX_BYTES=${E2E_MAX_BYTES:-65536} \
      LD_PRELOAD="$lib" timeout "${SANITIZER_LIMIT:-120}" compute-sanitizer --tool "$tool" $extra --error-exitcode 3 \
      "$build/tests/allreduce_e2e" $r 2 "$id_file" >"$logs/sanitizer-$tool-r$r.log" 2>&1 &
    pids+=($!)
  done
  rcs=()
  for pid in "${pids[@]}"; do wait "$pid"; rcs+=($?); done
  rm -f "$id_file"
  # memcheck and synccheck end with "ERROR SUMMARY: N errors", racecheck with
  # "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)".
  summaries=$(grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$logs"/sanitizer-$tool-r*.log | sed 's/=* *//' | tr '\n' ';')
  clean=$(grep -h -c "ERROR SUMMARY: 0 errors\|RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" \
    "$logs"/sanitizer-$tool-r*.log | awk '{s += $1} END {print s + 0}')
  taken=$(rig_taken_calls "$logs/sanitizer-$tool-r0.log")
  status=PASS
  # ... and our kernels really ran under the tool: calls were taken, not all forwarded.
  [ "${rcs[0]}" = 0 ] && [ "${rcs[1]}" = 0 ] && [ "$clean" = 2 ] && [ "$taken" -gt 0 ] ||
    { status=FAIL; failures=$((failures + 1)); }
  echo "compute-sanitizer $tool, 2 processes: $status (exit ${rcs[*]}; $summaries rank 0 took $taken calls)"
  grep -h "checks," "$logs"/sanitizer-$tool-r*.log | sed 's/^/  /'
done
exit $(( failures > 0 ))
