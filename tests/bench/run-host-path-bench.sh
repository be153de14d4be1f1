#!/usr/bin/env bash
# The host time of one eager call through the library, on the one-GPU rig (2 processes on
# GPU 0 under MPS): what issue 44 holds the hook to. Prints, for each of ROUNDS rounds and as
# medians over them (each ratio taken within its round):
#  - the CUDA floor: car_launch_cost_bench's "floor" step (our kernel's launch with PDL and
#    the ordering event's record, through the driver, on a busy stream), under MPS as the ranks are;
#    and the same launch and record timed one by one, each after another kernel's launch, as
#    car_nccl_bench times a call; and a 1 MiB staging copy timed the same way;
#  - the host time of a call our kernels take (car_nccl_bench's "host" rows of its isolated mode at
#    4 KiB, 64 KiB and 1 MiB, bf16) and its ratio to each floor, and to the floor the same
#    processes time in place of each call (car_nccl_bench --floor: the same launch and record,
#    timed as a call, the largest over the ranks as the host row is);
#  - a call forwarded by the plan (16 MiB, above NCCL_CAR_MAX_BYTES) with the library, with
#    NCCL alone, with the library switched off, with a set-up that fails after its exchange, and
#    with NCCL alone after an all-gather like that exchange; and the differences to NCCL alone;
# and once:
#  - the hook's own cost on this CPU over a libnccl.so.2 that does nothing
#    (tests/bench/hook_cost_bench.cc, tests/bench/null_nccl.cc).
# Usage: [NCCL_BARRIER=1] tests/bench/run-host-path-bench.sh BUILD [ROUNDS] [KEEP_DIR]
#   KEEP_DIR: where every bench's own output is copied at the end (per-sample figures).
#   NCCL_BARRIER=1: every arm's own barrier and reductions through pncclAllReduce
#   (car_nccl_bench --nccl-barrier), so that the library's arms are not the only ones whose
#   barrier is our kernel, which starts both ranks' samples at once (run-forwarded-diagnosis.sh).
set -euo pipefail
DEFAULT_ROUNDS=5
# shellcheck source=SCRIPTDIR/rig-bench-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/rig-bench-common.sh"
[ "${NCCL_BARRIER:-0}" = 1 ] && bench+=(--nccl-barrier)
step_us() { sed -n "s/^$2,//p" "$1"; }
median() { printf '%s\n' "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"; }
range() { printf '%s\n' "$@" | sort -g | sed -n '1p;$p' | paste -sd' ' | sed 's/ / to /'; }

# Every round times the floor, the taken calls and the five forwarded arms, so that each
# ratio compares figures minutes apart at most: this host's own figures drift by more than
# the goals' margins within a run. The forwarded arms: the library; NCCL alone; the library
# switched off (NCCL_CAR_DISABLE=1: the hook forwards every call at its first check and sets
# nothing up), which parts the hook from what our set-up leaves; and a set-up whose exchange
# went through NCCL but which then fails for want of memory (the test-only fault no-buffers:
# no block, no launcher, no mapping; the communicator is ineligible), which parts NCCL's own
# connections for our exchange from the memory and mappings a set-up keeps; and NCCL alone
# after one all-gather of a handshake record (record_bytes) per rank on a stream of its own,
# as the communicator's first collective, which is what that exchange is to NCCL. They go in
# another order each round.
forwarded_car() { LD_PRELOAD="$build/shim/libnccl-car.so" "${bench[@]}" --sizes 16M >"$work/forwarded-car-$1.csv"; }
forwarded_nccl() { "${bench[@]}" --sizes 16M >"$work/forwarded-nccl-$1.csv"; }
forwarded_off() {
  NCCL_CAR_DISABLE=1 LD_PRELOAD="$build/shim/libnccl-car.so" "${bench[@]}" --sizes 16M >"$work/forwarded-off-$1.csv"
}
forwarded_refused() {
  NCCL_CAR_TEST_FAULT=no-buffers LD_PRELOAD="$build/shim/libnccl-car.so" "${bench[@]}" --sizes 16M \
    >"$work/forwarded-refused-$1.csv"
}
forwarded_exchanged() { "${bench[@]}" --sizes 16M --first-all-gather "$record_bytes" >"$work/forwarded-exchanged-$1.csv"; }
arms=(car nccl off refused exchanged)
for round in $(seq "$rounds"); do
  # The floor under MPS too, as the ranks' calls are: an MPS client's launch costs more.
  "$build/tests/car_launch_cost_bench" --calls 400 --samples 9 >"$work/floor-$round.csv"
  LD_PRELOAD="$build/shim/libnccl-car.so" "${bench[@]}" --sizes 4K,64K,1M --floor >"$work/taken-$round.csv"
  for i in "${!arms[@]}"; do "forwarded_${arms[$(( (i + round) % ${#arms[@]} ))]}" "$round"; done
done

floors=() one_by_ones=() diffs=() off_diffs=() refused_diffs=() exchanged_diffs=()
for round in $(seq "$rounds"); do
  floor=$(step_us "$work/floor-$round.csv" "floor: busy: cuLaunchKernelEx PDL + cuEventRecord")
  # The same launch and record timed as car_nccl_bench times a call: alone, after another launch.
  one_by_one=$(step_us "$work/floor-$round.csv" "one by one: busy: cuLaunchKernelEx PDL + cuEventRecord")
  copy=$(step_us "$work/floor-$round.csv" "one by one: busy: cudaMemcpyAsync 1 MiB device to device")
  floors+=("$floor") one_by_ones+=("$one_by_one")
  echo "round $round: floor $floor us (cuLaunchKernelEx PDL + cuEventRecord, busy stream), one by one after" \
       "another launch $one_by_one us, a 1 MiB cudaMemcpyAsync one by one $copy us"
  for bytes in 4096 65536 1048576; do
    taken=$(host_us "$work/taken-$round.csv" "$bytes")
    as_call=$(awk -F, -v bytes="$bytes" '$1 == "floor" && $3 == bytes {print $4}' "$work/taken-$round.csv")
    echo "$taken $(python3 -c "print($taken / $floor, $taken / $one_by_one, $taken / $as_call)")" >>"$work/ratios-$bytes"
    echo "round $round: taken, $bytes bytes: $taken us host," \
         "$(python3 -c "print(f'{$taken / $floor:.2f}x the floor, {$taken / $one_by_one:.2f}x one by one')")," \
         "$(python3 -c "print(f'{$taken / $as_call:.2f}x the floor timed in its place ($as_call us)')")"
  done
  car=$(host_us "$work/forwarded-car-$round.csv" 16777216)
  nccl=$(host_us "$work/forwarded-nccl-$round.csv" 16777216)
  off=$(host_us "$work/forwarded-off-$round.csv" 16777216)
  refused=$(host_us "$work/forwarded-refused-$round.csv" 16777216)
  exchanged=$(host_us "$work/forwarded-exchanged-$round.csv" 16777216)
  echo "round $round: forwarded 16 MiB: library $car us, NCCL alone $nccl us, library switched off $off us," \
       "set-up failed after its exchange $refused us, NCCL alone after an exchange-like all-gather $exchanged us"
  diffs+=("$(python3 -c "print(round($car - $nccl, 3))")")
  off_diffs+=("$(python3 -c "print(round($off - $nccl, 3))")")
  refused_diffs+=("$(python3 -c "print(round($refused - $nccl, 3))")")
  exchanged_diffs+=("$(python3 -c "print(round($exchanged - $nccl, 3))")")
done

echo "floor: median $(median "${floors[@]}") us ($(range "${floors[@]}")); one by one: median" \
     "$(median "${one_by_ones[@]}") us ($(range "${one_by_ones[@]}"))"
for bytes in 4096 65536 1048576; do
  mapfile -t taken < <(cut -d' ' -f1 "$work/ratios-$bytes")
  mapfile -t to_floor < <(cut -d' ' -f2 "$work/ratios-$bytes" | xargs printf '%.2f\n')
  mapfile -t to_one_by_one < <(cut -d' ' -f3 "$work/ratios-$bytes" | xargs printf '%.2f\n')
  mapfile -t to_as_call < <(cut -d' ' -f4 "$work/ratios-$bytes" | xargs printf '%.2f\n')
  echo "taken, $bytes bytes: median $(median "${taken[@]}") us host; per round $(median "${to_floor[@]}")x the floor" \
       "($(range "${to_floor[@]}")), $(median "${to_one_by_one[@]}")x one by one ($(range "${to_one_by_one[@]}"))," \
       "$(median "${to_as_call[@]}")x the floor timed in its place ($(range "${to_as_call[@]}"))"
done
echo "forwarded 16 MiB, library less NCCL alone: median $(median "${diffs[@]}") us ($(range "${diffs[@]}"));" \
     "switched off less NCCL alone: median $(median "${off_diffs[@]}") us ($(range "${off_diffs[@]}"));" \
     "set-up failed after its exchange less NCCL alone: median $(median "${refused_diffs[@]}") us" \
     "($(range "${refused_diffs[@]}")); NCCL alone after an exchange-like all-gather less NCCL alone: median" \
     "$(median "${exchanged_diffs[@]}") us ($(range "${exchanged_diffs[@]}"))"
echo "hook alone, over a libnccl.so.2 that does nothing: $(LD_LIBRARY_PATH="$build/tests/null-nccl" \
  LD_PRELOAD="$build/shim/libnccl-car.so" "$build/tests/hook_cost_bench" --calls 200000 --samples 15 2>/dev/null)"
