#!/usr/bin/env bash
# README command 1: set up, build, and run the main job: say where the library is and how
# to use it, run `nccl-car doctor`, and on a machine with a GPU the engine benchmark.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh"
build=${BUILD_DIR:-$root/build}
echo
echo "Built $build/shim/libnccl-car.so. Use it with:"
echo "  LD_PRELOAD=$build/shim/libnccl-car.so NCCL_CAR_DEBUG=INFO <your NCCL program>"
echo
NCCL_CAR_LIB="$build/shim/libnccl-car.so" python3 "$root/tools/nccl-car" doctor
echo
"$build/tests/car_bench" "$@"
