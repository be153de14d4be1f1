#!/usr/bin/env bash
# What the hook adds to a forwarded call in instructions and in data cache lines it finds out
# of the nearer caches, as it would between two calls of the real NCCL, whose own work pushes
# them out: hook_cost_bench --evict writes 4 MiB before each call, and cachegrind simulates a
# 32 KiB L1 and a 2 MiB last level (a core's L2). Per call: hook less NCCL's own function,
# each the difference of 500 and 1,000 calls (which cancels the set-up). Needs no GPU; three
# cases: a communicator never ours (1 rank) over a libnccl.so.2 that does nothing, and a
# set-up one (2 ranks over the stand-in and the fake CUDA runtime), on and switched off.
# Numbers are for comparing builds on one machine; the rig's CPU is another.
# Usage: tests/bench/run-hook-cache-lines.sh BUILD
set -euo pipefail
build=$(cd "${1:?usage: $(basename "$0") BUILD}" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bench=$build/tests/hook_cost_bench
standin=(LD_LIBRARY_PATH="$build/tests/standin" STANDIN_NCCL_EXCHANGE=1 LD_PRELOAD="$build/tests/fake-cuda/libnccl-car.so")

# CASE RANKS ENV...: one line of figures.
measure() {
  local label=$1 ranks=$2 side calls
  shift 2
  for side in hook direct; do
    for calls in 500 1000; do
      env "$@" valgrind --tool=cachegrind --cache-sim=yes --D1=32768,8,64 --LL=2097152,16,64 \
        --cachegrind-out-file=/dev/null "$bench" --ranks "$ranks" --calls "$calls" --samples 1 --only "$side" \
        --evict 4194304 >/dev/null 2>"$work/$side-$calls.txt"
    done
  done
  python3 "$root/tests/bench/cache_lines_added.py" "$label" "$ranks" "$work"
}

measure "never ours (1 rank), null NCCL" 1 LD_LIBRARY_PATH="$build/tests/null-nccl" LD_PRELOAD="$build/shim/libnccl-car.so"
measure "set up (2 ranks), stand-in" 2 "${standin[@]}"
measure "set up (2 ranks), stand-in, switched off" 2 NCCL_CAR_DISABLE=1 "${standin[@]}"
