#!/usr/bin/env bash
# Why a forwarded call costs more on a communicator our set-up ran on (docs/benchmarks.md, "The
# eager host path against the CUDA floor"), on the one-GPU rig (2 processes on GPU 0 under MPS,
# a NCCL_HOSTID each: NCCL's calls go over sockets). Prints:
#  - what NCCL chose, from one untimed 16 MiB all-reduce with NCCL_DEBUG=INFO: for NCCL alone,
#    the library, and NCCL alone after an all-gather like our exchange (car_nccl_bench
#    --first-all-gather): each collective's algorithm and protocol, the transports, and how many
#    send connections were made;
#  - the host time of the forwarded 16 MiB call, NCCL alone against the library, with NCCL's
#    runtime connection off (NCCL_RUNTIME_CONNECT=0: every connection made at init, whatever the
#    first collective) and with PAT off (NCCL_PAT_ENABLE=0), ROUNDS rounds each.
# Usage: tests/bench/run-forwarded-diagnosis.sh BUILD [ROUNDS] [KEEP_DIR]
set -euo pipefail
DEFAULT_ROUNDS=3
# shellcheck source=SCRIPTDIR/rig-bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/rig-bench-common.sh"
bench+=(--sizes 16M)
library="LD_PRELOAD=$build/shim/libnccl-car.so"

debug=(NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=INIT,NET,TUNING")
env "${debug[@]}" "${bench[@]}" --probe >"$work/choices-alone.txt" 2>&1
env "${debug[@]}" "$library" "${bench[@]}" --probe >"$work/choices-library.txt" 2>&1
env "${debug[@]}" "${bench[@]}" --probe --first-all-gather "$record_bytes" >"$work/choices-exchanged.txt" 2>&1
for arm in alone library exchanged; do
  echo "NCCL's choices, $arm:"
  grep -hoE "(AllReduce|AllGather): [0-9]+ Bytes -> Algo [A-Z_]+ proto [A-Z0-9_]+|via [A-Z0-9]+/[A-Za-z0-9/_]+" \
    "$work/choices-$arm.txt" | sort | uniq -c
  echo "  send connections: $(grep -c '\[send\] via' "$work/choices-$arm.txt" || true)"
done

for setting in NCCL_RUNTIME_CONNECT=0 NCCL_PAT_ENABLE=0; do
  name=${setting%%=*}
  for round in $(seq "$rounds"); do
    env "$setting" "${bench[@]}" >"$work/$name-alone-$round.csv"
    env "$setting" "$library" "${bench[@]}" >"$work/$name-library-$round.csv"
    alone=$(host_us "$work/$name-alone-$round.csv" 16777216)
    with=$(host_us "$work/$name-library-$round.csv" 16777216)
    echo "$setting, round $round: forwarded 16 MiB, NCCL alone $alone us, library $with us," \
         "library less NCCL alone $(python3 -c "print(round($with - $alone, 3))") us"
  done
done
