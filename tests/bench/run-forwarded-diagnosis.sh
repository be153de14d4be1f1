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
#    first collective), with PAT off (NCCL_PAT_ENABLE=0), and with NCCL's registration of user
#    buffers off (NCCL_LOCAL_REGISTER=0, NCCL_GRAPH_REGISTER=0), ROUNDS rounds each;
#  - what a set-up keeps, parted from how calls go on a set-up communicator: the forwarded call
#    timed on a communicator the library refused for want of room (NCCL_CAR_GPU_MEMORY_BYTES
#    of one block) while another communicator of the same processes holds a set-up that
#    succeeded (car_nccl_bench --set-up-another-first), against NCCL alone with the same second
#    communicator, and the library and NCCL alone as they are; and the library and NCCL alone
#    with the bench's own barrier and reductions through NCCL in both (--nccl-barrier: with the
#    library they are otherwise our kernels, which start both ranks' samples at once on the one
#    GPU, where NCCL's socket barrier leaves them apart); in another order each round.
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

# One default block (shim/ipc: 50,337,280 bytes on the rig) fits under this bound, two do not.
one_block_bound=75000000
kept_alone() { "${bench[@]}" >"$work/kept-alone-$1.csv"; }
kept_alone_another() { "${bench[@]}" --set-up-another-first >"$work/kept-alone-another-$1.csv"; }
kept_library() { env "$library" "${bench[@]}" >"$work/kept-library-$1.csv"; }
kept_refused_beside() {
  env NCCL_CAR_DEBUG=INFO NCCL_CAR_GPU_MEMORY_BYTES=$one_block_bound "$library" "${bench[@]}" \
    --set-up-another-first >"$work/kept-refused-beside-$1.csv" 2>"$work/kept-refused-beside-$1.log"
}
kept_alone_nccl_barrier() { "${bench[@]}" --nccl-barrier >"$work/kept-alone-nccl-barrier-$1.csv"; }
kept_library_nccl_barrier() { env "$library" "${bench[@]}" --nccl-barrier >"$work/kept-library-nccl-barrier-$1.csv"; }
kept_arms=(alone alone_another library refused_beside alone_nccl_barrier library_nccl_barrier)
for round in $(seq "$rounds"); do
  for i in "${!kept_arms[@]}"; do "kept_${kept_arms[$(( (i + round) % ${#kept_arms[@]} ))]}" "$round"; done
  alone=$(host_us "$work/kept-alone-$round.csv" 16777216)
  alone_another=$(host_us "$work/kept-alone-another-$round.csv" 16777216)
  with=$(host_us "$work/kept-library-$round.csv" 16777216)
  beside=$(host_us "$work/kept-refused-beside-$round.csv" 16777216)
  alone_nb=$(host_us "$work/kept-alone-nccl-barrier-$round.csv" 16777216)
  with_nb=$(host_us "$work/kept-library-nccl-barrier-$round.csv" 16777216)
  # Both must show on every rank: the second communicator set up, the timed one refused for room.
  eligible=$(grep -c "setup: eligible" "$work/kept-refused-beside-$round.log" || true)
  refused=$(grep -c "no room for another buffer block" "$work/kept-refused-beside-$round.log" || true)
  echo "kept, round $round: forwarded 16 MiB: NCCL alone $alone us, NCCL alone with a second communicator" \
       "$alone_another us, library $with us, library on a communicator refused for room beside a set-up one" \
       "$beside us ($eligible log lines say a communicator was set up, $refused that one had no room); less NCCL alone: library" \
       "$(python3 -c "print(round($with - $alone, 3))"), refused beside a set-up one" \
       "$(python3 -c "print(round($beside - $alone_another, 3))") (against NCCL alone with a second communicator)"
  echo "barrier through NCCL, round $round: forwarded 16 MiB: NCCL alone $alone_nb us, library $with_nb us," \
       "library less NCCL alone $(python3 -c "print(round($with_nb - $alone_nb, 3))") us"
done

for setting in NCCL_RUNTIME_CONNECT=0 NCCL_PAT_ENABLE=0 NCCL_LOCAL_REGISTER=0 NCCL_GRAPH_REGISTER=0; do
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
