#!/usr/bin/env bash
# What each way into a program that loads NCCL itself costs, on the CPU (no GPU needed):
# NCCL alone, LD_PRELOAD (which does not reach such a program: the cost of loading our
# library), the drop-in folder, LD_AUDIT by name and by path. For each: the median wall time
# of RUNS whole processes (start, dlopen, one call, exit; the routes take turns, so that a
# busy machine slows them alike) and route_bench's own figures (dlopen, first call,
# nanoseconds per ncclGetVersion through the handle).
# Usage: tests/bench/run-route-bench.sh [BUILD_DIR] [LIBNCCL] [RUNS]
#   LIBNCCL: a real libnccl.so.2 (default /usr/local/cuda/lib64/libnccl.so.2), else the stand-in.
set -euo pipefail
build=$(realpath "${1:-build}")
nccl=${2:-/usr/local/cuda/lib64/libnccl.so.2}
[ -f "$nccl" ] || nccl=$build/tests/standin/libnccl.so.2
nccl=$(realpath "$nccl")
runs=${3:-50}
bench=$build/tests/route_bench
lib=$build/shim/libnccl-car.so
audit=$build/shim/libnccl-car-audit.so
folder=$(dirname "$nccl")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A drop-in folder for that NCCL, as a user makes one.
"$(dirname "$0")/../../tools/nccl-car" dropin --lib "$lib" --nccl-lib "$nccl" "$work/dropin" >/dev/null

names=("NCCL alone, by name" "LD_PRELOAD, by name (not reached)" "drop-in folder, by name"
       "LD_AUDIT, by name" "LD_AUDIT, by path")
# One line per route: its environment, then the library route_bench opens.
routes=("LD_LIBRARY_PATH=$folder libnccl.so.2"
        "LD_LIBRARY_PATH=$folder LD_PRELOAD=$lib libnccl.so.2"
        "LD_LIBRARY_PATH=$work/dropin:$folder libnccl.so.2"
        "LD_LIBRARY_PATH=$folder LD_AUDIT=$audit libnccl.so.2"
        "LD_AUDIT=$audit $nccl")
for _ in $(seq "$runs"); do
  for i in "${!routes[@]}"; do
    start=$(date +%s%N)
    # shellcheck disable=SC2086 # a route is a word list
    env ${routes[$i]% *} "$bench" "${routes[$i]##* }" 1 >/dev/null 2>&1
    echo $(( ($(date +%s%N) - start) / 1000 )) >>"$work/$i"
  done
done

echo "NCCL: $nccl; $runs processes per route, taking turns; $(nproc) CPUs"
echo "| route | process, median us | route_bench |"
echo "| --- | --- | --- |"
for i in "${!routes[@]}"; do
  median=$(sort -n "$work/$i" | sed -n "$(( (runs + 1) / 2 ))p")
  # shellcheck disable=SC2086
  figures=$(env ${routes[$i]% *} "$bench" "${routes[$i]##* }" 2>/dev/null)
  echo "| ${names[$i]} | $median | $figures |"
done
