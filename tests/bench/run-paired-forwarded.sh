#!/usr/bin/env bash
# What the hook adds to a forwarded call, measured finely enough to see a fraction of a
# microsecond on the one-GPU rig: in the same processes, each sample of 20 forwarded 16 MiB
# all-reduces goes through the hook and through NCCL's own pncclAllReduce in turn
# (car_nccl_bench --paired-direct), with the library on (the communicator set up) and switched
# off (NCCL_CAR_DISABLE=1: the method's own bias), in alternating runs. Arms in separate pairs
# of processes cannot: NCCL alone moves by microseconds from one pair to the next.
# Prints per run the median of hook less direct over its samples (and by which went first, and
# how many ranks forwarded the hooked calls as too large: the plan of a set-up communicator),
# then the median over every run's samples of each arm.
# Usage: tests/bench/run-paired-forwarded.sh BUILD [ROUNDS] [KEEP_DIR]
set -euo pipefail
DEFAULT_ROUNDS=3
# shellcheck source=SCRIPTDIR/rig-bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/rig-bench-common.sh"
# An even number of samples: as many with the hook's call first as with NCCL's own first.
paired=("${bench[@]}" --sizes 16M --samples 40 --paired-direct)
library="LD_PRELOAD=$build/shim/libnccl-car.so"
added() { python3 "$root/tests/bench/paired_added.py" "$@"; }
for round in $(seq "$rounds"); do
  env NCCL_CAR_DEBUG=INFO "$library" "${paired[@]}" >"$work/on-$round.csv" 2>"$work/on-$round.log"
  env NCCL_CAR_DISABLE=1 "$library" "${paired[@]}" >"$work/off-$round.csv"
  # Assigned first: a missing row stops the script.
  on=$(added "$work/on-$round.csv")
  off=$(added "$work/off-$round.csv")
  # Every rank's released line: the hooked calls were forwarded as too large, by a set-up communicator.
  too_large=$(grep -c "released: .*too-large=[1-9]" "$work/on-$round.log" || true)
  echo "round $round: hook less pncclAllReduce, library on: $on ($too_large ranks' released lines count" \
       "calls forwarded as too large); switched off: $off"
done
on=$(added "$work"/on-*.csv)
off=$(added "$work"/off-*.csv)
echo "all rounds: library on: $on"
echo "all rounds: switched off: $off"
