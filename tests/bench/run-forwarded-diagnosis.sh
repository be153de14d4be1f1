#!/usr/bin/env bash
# Why a forwarded call costs more on a communicator our set-up ran on (docs/benchmarks.md, "The
# eager host path against the CUDA floor"), on the one-GPU rig (2 processes on GPU 0 under MPS,
# a NCCL_HOSTID each: NCCL's calls go over sockets). Prints:
#  - what NCCL chose, from one untimed 16 MiB all-reduce with NCCL_DEBUG=INFO: for NCCL alone,
#    the library, and NCCL alone after an all-gather like our exchange (car_nccl_bench
#    --first-all-gather): each collective's algorithm and protocol, the transports, and how many
#    send connections were made;
#  - what a set-up keeps, parted from how calls go on a set-up communicator: the forwarded
#    16 MiB call timed on a communicator the library refused for want of room
#    (NCCL_CAR_GPU_MEMORY_BYTES of one block) while another communicator of the same processes
#    holds a set-up that succeeded (car_nccl_bench --set-up-another-first: the timed one is
#    split from the other), against NCCL alone made the same way; the library and NCCL alone
#    as they are; and both with the bench's own barrier and reductions through NCCL
#    (--nccl-barrier: with the library they are otherwise our kernels, which start both ranks'
#    samples at once on the one GPU, where NCCL's socket barrier leaves them apart); and, in the
#    same processes, the call through the hook against NCCL's own pncclAllReduce, sample by
#    sample in turn (--paired-direct: all else the same); ROUNDS rounds, in another order each
#    round;
#  - the same call, NCCL alone against the library, with NCCL's runtime connection off
#    (NCCL_RUNTIME_CONNECT=0: every connection made at init, whatever the first collective),
#    with PAT off (NCCL_PAT_ENABLE=0), and with NCCL's registration of user buffers off
#    (NCCL_LOCAL_REGISTER=0, NCCL_GRAPH_REGISTER=0), ROUNDS rounds each.
# Usage: [SETTINGS="NAME=VALUE ..."] tests/bench/run-forwarded-diagnosis.sh BUILD [ROUNDS] [KEEP_DIR]
#   SETTINGS: the NCCL settings of the last part (default: the four above; empty: no last part).
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
# FIGURE FIGURE -> their difference, rounded; stops the script when a bench gave no figure.
less() { python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 3))" "${1:?no figure}" "${2:?no figure}"; }
kept_alone() { "${bench[@]}" >"$work/kept-alone-$1.csv"; }
# With the exchange's like on the timed communicator, as the library's arm has its exchange.
kept_alone_another() {
  "${bench[@]}" --set-up-another-first --first-all-gather "$record_bytes" >"$work/kept-alone-another-$1.csv"
}
kept_library() { env "$library" "${bench[@]}" >"$work/kept-library-$1.csv"; }
kept_refused_beside() {
  env NCCL_CAR_DEBUG=INFO NCCL_CAR_GPU_MEMORY_BYTES=$one_block_bound "$library" "${bench[@]}" \
    --set-up-another-first >"$work/kept-refused-beside-$1.csv" 2>"$work/kept-refused-beside-$1.log"
}
kept_alone_nccl_barrier() { "${bench[@]}" --nccl-barrier >"$work/kept-alone-nccl-barrier-$1.csv"; }
kept_library_nccl_barrier() { env "$library" "${bench[@]}" --nccl-barrier >"$work/kept-library-nccl-barrier-$1.csv"; }
# LOG -> how many ranks' timed communicators the library refused for room, and how many ranks'
# other communicators it set up (car_nccl_bench names both on stderr).
kept_as_meant() {
  local refused=0 set_up=0 timed other
  while read -r timed other; do
    grep -q "comm $timed .*no room for another buffer block" "$1" && refused=$((refused + 1))
    grep -q "comm $other .*setup: eligible" "$1" && set_up=$((set_up + 1))
  done < <(sed -n 's/^car_nccl_bench rank [0-9]*: timed communicator \(0x[0-9a-f]*\), the other \(0x[0-9a-f]*\)$/\1 \2/p' "$1")
  echo "timed communicator refused for room on $refused ranks, the other set up on $set_up"
}
# An even number of samples: as many with the hook's call first as with NCCL's own first.
kept_paired() {
  env NCCL_CAR_DEBUG=INFO "$library" "${bench[@]}" --samples 10 --paired-direct >"$work/kept-paired-$1.csv" \
    2>"$work/kept-paired-$1.log"
}
# CSV -> hook less pncclAllReduce at 16 MiB (tests/bench/paired_added.py); stops the script when a row is missing.
paired_added() { python3 "$root/tests/bench/paired_added.py" "$1"; }
kept_arms=(alone alone_another library refused_beside alone_nccl_barrier library_nccl_barrier paired)
for round in $(seq "$rounds"); do
  for i in "${!kept_arms[@]}"; do "kept_${kept_arms[$(( (i + round) % ${#kept_arms[@]} ))]}" "$round"; done
  alone=$(host_us "$work/kept-alone-$round.csv" 16777216)
  alone_another=$(host_us "$work/kept-alone-another-$round.csv" 16777216)
  with=$(host_us "$work/kept-library-$round.csv" 16777216)
  beside=$(host_us "$work/kept-refused-beside-$round.csv" 16777216)
  alone_nb=$(host_us "$work/kept-alone-nccl-barrier-$round.csv" 16777216)
  with_nb=$(host_us "$work/kept-library-nccl-barrier-$round.csv" 16777216)
  library_less=$(less "$with" "$alone")
  beside_less=$(less "$beside" "$alone_another")
  nb_less=$(less "$with_nb" "$alone_nb")
  echo "kept, round $round: forwarded 16 MiB: NCCL alone $alone us, library $with us (less NCCL alone" \
       "$library_less); NCCL alone on a communicator split from another $alone_another us, library there" \
       "beside another set up $beside us (less $beside_less; $(kept_as_meant "$work/kept-refused-beside-$round.log"))"
  echo "barrier through NCCL, round $round: forwarded 16 MiB: NCCL alone $alone_nb us, library $with_nb us," \
       "library less NCCL alone $nb_less us"
  paired=$(paired_added "$work/kept-paired-$round.csv")
  # Every rank's released line: the hooked 16 MiB calls were forwarded as too large.
  too_large=$(grep -c "released: .*too-large=[1-9]" "$work/kept-paired-$round.log" || true)
  echo "paired, round $round: forwarded 16 MiB through the hook less through pncclAllReduce, same processes:" \
       "$paired; $too_large ranks' released lines count calls forwarded as too large"
done

read -r -a settings <<<"${SETTINGS-NCCL_RUNTIME_CONNECT=0 NCCL_PAT_ENABLE=0 NCCL_LOCAL_REGISTER=0 NCCL_GRAPH_REGISTER=0}"
for setting in "${settings[@]}"; do
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
