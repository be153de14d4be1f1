#!/usr/bin/env bash
# A real NCCL other than the machine's own, checked on one GPU, then nccl-car over it
# (docs/design.md, "NCCL versions"). For NCCL 2.32.3 from ../shared/third_party (sm_90 only):
#   tests/e2e/nccl-version-check.sh LIBNCCL BUILD alone
#       LIBNCCL: a libnccl.so.2, or its .xz (unpacked once into /tmp/nccl-version-check/lib).
#       Prints its sha256 and version, then 2 processes of allreduce_e2e under MPS through
#       that NCCL alone (no nccl-car): exact sums in fp16, bf16 and fp32 up to 16 MiB.
#   tests/e2e/nccl-version-check.sh LIBNCCL BUILD SCENARIO...
#       run_e2e.py's scenarios with that NCCL underneath (NCCL_HOME=/tmp/nccl-version-check).
# BUILD is the build folder (its tests/allreduce_e2e, shim/libnccl-car.so).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ $# -ge 3 ] || { sed -n 2,10p "$0" >&2; exit 2; }
library=$1 build=$(cd "$2" && pwd)
shift 2
home=/tmp/nccl-version-check
mkdir -p "$home/lib"
if [ "${library%.xz}" != "$library" ]; then
  [ -f "$home/lib/libnccl.so.2" ] || xz -dc "$library" > "$home/lib/libnccl.so.2"
else
  cp -f "$library" "$home/lib/libnccl.so.2"
fi
real=$home/lib/libnccl.so.2
sha256sum "$real"
python3 -c "import ctypes, sys; n = ctypes.CDLL(sys.argv[1]); v = ctypes.c_int(); \
print('ncclGetVersion', n.ncclGetVersion(ctypes.byref(v)), v.value)" "$real"

if [ "$1" = alone ]; then
  "$root/tests/e2e/mps.sh" restart
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/nccl-car-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/nccl-car-mps-log
  id=$(mktemp -u /tmp/nccl-version-check-id.XXXXXX)
  status=0
  pids=()
  for rank in 0 1; do
    LD_LIBRARY_PATH=$home/lib NCCL_HOSTID=nccl-version-check-$rank NCCL_SOCKET_IFNAME=lo NCCL_NVLS_ENABLE=0 \
      NCCL_DEBUG=VERSION timeout 300 "$build/tests/allreduce_e2e" "$rank" 2 "$id" 0 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  "$root/tests/e2e/mps.sh" stop
  rm -f "$id"
  echo "NCCL alone: exit $status"
  exit "$status"
fi
NCCL_HOME=$home exec python3 "$root/tests/e2e/run_e2e.py" --build "$build" "$@"
