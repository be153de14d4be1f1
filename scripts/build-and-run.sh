#!/usr/bin/env bash
# README command 1: set up, build, and run the main job: the engine benchmark on this
# machine's GPU (it says so plainly and exits 0 where there is none).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh"
"${BUILD_DIR:-$root/build}/tests/car_bench" "$@"
