# Sourced by the rig's host-time scripts (run-host-path-bench.sh, run-forwarded-diagnosis.sh),
# with their BUILD [ROUNDS] [KEEP_DIR] arguments and DEFAULT_ROUNDS set. Sets root, build,
# rounds, work (a scratch folder: copied to KEEP_DIR, if given, and removed at exit), starts a
# fresh MPS daemon (stopped at exit) for the ranks' processes, and defines:
#   bench:   car_nccl_bench's command for 2 ranks on GPU 0, bf16, isolated, plain, 20 calls a
#            sample, median of 9 samples (add --sizes)
#   host_us: FILE BYTES -> the "host" row's us of that size in a car_nccl_bench output
#   record_bytes: one rank's part of our set-up's exchange, a HandshakeRecord
#            (shim/handshake/handshake_record.h asserts its size), for --first-all-gather
# shellcheck shell=bash disable=SC2034  # these are for the scripts that source this one
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: $(basename "$0") BUILD [ROUNDS] [KEEP_DIR]}" && pwd)
rounds=${2:-$DEFAULT_ROUNDS}
keep=${3:-}
work=$(mktemp -d)
trap '[ -z "$keep" ] || { mkdir -p "$keep" && cp "$work"/* "$keep"/; }; rm -rf "$work"; "$root/tests/e2e/mps.sh" stop >/dev/null 2>&1 || true' EXIT

"$root/tests/e2e/mps.sh" restart >/dev/null
export CUDA_MPS_PIPE_DIRECTORY=/tmp/nccl-car-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/nccl-car-mps-log
bench=("$build/tests/car_nccl_bench" --ranks 2 --one-gpu --type bf16 --modes isolated --workloads plain
       --calls 20 --samples 9)
# "host,plain,BYTES,US,...": the host row of each size.
host_us() { awk -F, -v bytes="$2" '$1 == "host" && $3 == bytes {print $4}' "$1"; }
record_bytes=280
