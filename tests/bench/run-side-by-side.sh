#!/usr/bin/env bash
# NCCL against NCCL + nccl-car on the GPUs of this machine, with our own benchmark program
# (build/tests/car_nccl_bench, no nccl-tests needed). Every configuration runs once per
# round, in the same order each round, so that drift hits all of them alike:
#   nccl          NCCL alone
#   nccl-R2       NCCL, buffers registered as symmetric windows (nccl-tests -R 2)
#   nccl-gm0      NCCL with NCCL_GRAPH_MIXING_SUPPORT=0
#   nccl-R2-gm0   both
#   car           NCCL + libnccl-car.so
# and, when SIDE_BY_SIDE_CONFIGS names them, variants of ours: car-pdl0 (NCCL_CAR_PDL=0),
# car-1shot, car-2shot, car-1stage, car-2stage (NCCL_CAR_ALGO).
# Writes LOGS/<config>.<round>.csv; tools/nccl-car bench --from LOGS prints the table.
# Usage: tests/bench/run-side-by-side.sh BUILD_DIR LOGS [ROUNDS] [extra car_nccl_bench args]
set -uo pipefail
build=$(realpath "$1")
logs=$2
rounds=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
mkdir -p "$logs"
program="$build/tests/car_nccl_bench"
[ -x "$program" ] || program="$build/car_nccl_bench"
lib="$build/shim/libnccl-car.so"
[ -f "$lib" ] || lib="$build/libnccl-car.so"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
failures=0
for round in $(seq "$rounds"); do
  for config in ${SIDE_BY_SIDE_CONFIGS:-nccl nccl-R2 nccl-gm0 nccl-R2-gm0 car}; do
    args=()
    env=()
    case $config in
      *R2*) args+=(--symmetric) ;;
    esac
    case $config in
      *gm0*) env+=(NCCL_GRAPH_MIXING_SUPPORT=0) ;;
      car*) env+=(LD_PRELOAD="$lib" NCCL_CAR_DEBUG=INFO) ;;
    esac
    case $config in
      car-pdl0) env+=(NCCL_CAR_PDL=0) ;;
      car-1shot | car-2shot | car-1stage | car-2stage) env+=(NCCL_CAR_ALGO="${config#car-}") ;;
    esac
    out="$logs/$config.$round.csv"
    env "${env[@]}" timeout 120 "$program" "${args[@]}" "$@" >"$out" 2>"$logs/$config.$round.err"
    rc=$?
    echo "round $round $config: exit $rc, $(grep -c '^[0-9]' "$out") sizes"
    [ $rc -eq 0 ] || failures=$((failures + 1))
  done
done
exit $(( failures > 0 ))
