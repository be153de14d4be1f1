#!/bin/sh
# Runs the shim suite's [nodriver] cases, or reports them skipped (exit 77 for ctest) on a
# machine where libcuda.so.1 loads, which is what the library itself checks.
# Usage: run-without-driver.sh PYTHON car_shim_tests
python=$1
suite=$2
if "$python" -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
  echo "this machine has an NVIDIA driver (libcuda.so.1 loads): the no-driver cases are skipped"
  exit 77
fi
exec "$suite" "[nodriver]"
