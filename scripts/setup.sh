#!/usr/bin/env bash
# Installs everything nccl-car needs to build on a fresh Debian 12 machine: CMake, Ninja,
# g++, spdlog, fmt and Catch2 v2 from Debian's packages, and NCCL's headers from PyPI when
# neither NCCL_HOME nor the CUDA folder has them. The CUDA toolkit itself must be present
# (CUDA_HOME or /usr/local/cuda). Safe to run again: it only installs what is missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

need_packages=()
command -v cmake >/dev/null || need_packages+=(cmake)
command -v ninja >/dev/null || need_packages+=(ninja-build)
command -v g++ >/dev/null || need_packages+=(g++)
command -v python3 >/dev/null || need_packages+=(python3)
[ -f /usr/include/spdlog/spdlog.h ] || need_packages+=(libspdlog-dev)
[ -f /usr/include/fmt/format.h ] || need_packages+=(libfmt-dev)
[ -f /usr/include/catch2/catch.hpp ] || need_packages+=(catch2)
if [ ${#need_packages[@]} -gt 0 ]; then
  echo "setup: installing ${need_packages[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_packages[@]}" >/dev/null
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda_home/bin/nvcc" ]; then
  echo "setup: no nvcc at $cuda_home/bin/nvcc; install the CUDA toolkit or set CUDA_HOME" >&2
  exit 1
fi

# NCCL headers: NCCL_HOME, then the CUDA folder, then the nvidia-nccl-cu13 wheel.
if [ -n "${NCCL_HOME:-}" ] && [ -f "$NCCL_HOME/include/nccl.h" ]; then
  nccl_home=$NCCL_HOME
elif [ -f "$cuda_home/include/nccl.h" ]; then
  nccl_home=$cuda_home
else
  nccl_home="$root/.deps/nccl"
  if [ ! -f "$nccl_home/include/nccl.h" ]; then
    echo "setup: no nccl.h found; fetching the nvidia-nccl-cu13 wheel"
    python3 -m pip install -q --no-deps --target "$root/.deps/wheel" nvidia-nccl-cu13
    mkdir -p "$nccl_home"
    cp -r "$root"/.deps/wheel/nvidia/nccl/include "$root"/.deps/wheel/nvidia/nccl/lib "$nccl_home"/
  fi
fi
echo "$nccl_home" > "$root/.deps-nccl-home"
echo "setup: CUDA at $cuda_home, NCCL headers at $nccl_home"
