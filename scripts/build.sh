#!/usr/bin/env bash
# Configures and builds nccl-car into build/ (or $BUILD_DIR) after scripts/setup.sh: every
# target, or the ones named (scripts/build.sh nccl_car_main_job). CMAKE_ARGS adds configure
# options, e.g. CMAKE_ARGS=-DNCCL_CAR_CUDA_ARCH=90 for one GPU architecture only.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
build=${BUILD_DIR:-$root/build}
nccl_home=$(cat "$root/.deps-nccl-home")
cmake -S "$root" -B "$build" -G Ninja -DNCCL_HOME="$nccl_home" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$build" --parallel ${1:+--target "$@"}
