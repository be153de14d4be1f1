#!/usr/bin/env bash
# README command 1: set up, build, and run the main job: say where the library is and how
# to use it, run `nccl-car doctor`, then measure what this machine allows:
#   2 or more GPUs: nccl-car against NCCL's best configuration on all of them (nccl-car
#                   bench with our car_nccl_bench: bf16, its default modes, workloads and
#                   sizes, 5 repeats), the runs kept in $build/bench-side-by-side/;
#                   arguments go to nccl-car bench
#   1 GPU:          the engine benchmark, build/tests/car_bench; arguments go to it
#   no GPU:         says so and exits 0
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# What the main job runs (the library, what is installed with it, the benchmarks), not the tests.
"$root/scripts/build.sh" nccl_car_main_job
build=${BUILD_DIR:-$root/build}
export NCCL_CAR_LIB="$build/shim/libnccl-car.so"
echo
echo "Built $NCCL_CAR_LIB. Use it with:"
echo "  LD_PRELOAD=$NCCL_CAR_LIB NCCL_CAR_DEBUG=INFO <your NCCL program>"
echo
python3 "$root/tools/nccl-car" doctor
echo
# The GPUs CUDA shows (CUDA_VISIBLE_DEVICES applies), asked as the tool asks: 0 without a driver.
gpus=$(PYTHONPATH="$root/tools" python3 -c \
  'from nccl_car_cli.gpu_probe import visible_gpu_count; print(visible_gpu_count())')
if [ "$gpus" -eq 0 ]; then
  echo "No GPU visible here: nothing to measure (the library would forward every call to NCCL)."
  exit 0
fi
if [ "$gpus" -eq 1 ] || [ ! -x "$build/tests/car_nccl_bench" ]; then
  [ "$gpus" -eq 1 ] || echo "car_nccl_bench was not built (no libnccl.so.2 found at build time): running the engine benchmark instead."
  exec "$build/tests/car_bench" "$@"
fi
runs="$build/bench-side-by-side"
rm -rf "$runs"
echo "nccl-car against NCCL's best on $gpus GPUs (every run's output kept in $runs):"
exec python3 "$root/tools/nccl-car" bench --dtypes bf16 --repeats 5 \
  --timeout 300 --save "$runs" --csv "$runs/bench.csv" --chart "$runs/bench.png" "$@"
