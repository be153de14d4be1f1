#!/usr/bin/env bash
# Installs everything nccl-car needs to build on a fresh Debian 12 machine: CMake, Ninja,
# g++, spdlog, fmt and Catch2 v2, pip and venv from Debian's packages, and NCCL's
# header: the version pinned in scripts/nccl-headers.env, from the CUDA folder when its
# nccl.h is that version, else taken once from the nvidia-nccl-cu13 wheel on PyPI into
# .deps/nccl-<version>/include (15-30 s; the wheel is not kept). NCCL_HOME names another
# folder whose include/nccl.h to build against (NCCL_HOME=/usr/local/cuda: CUDA's bundled
# one). The CUDA toolkit itself must be present (CUDA_HOME or /usr/local/cuda). Safe to run
# again: it only installs or fetches what is missing.
#   scripts/setup.sh                   writes the chosen NCCL folder to .deps-nccl-home
#   scripts/setup.sh --other-api-level also the second API level's to .deps-nccl-other-home
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=nccl-headers.env
. "$root/scripts/nccl-headers.env"

install_packages() {
  echo "setup: installing $*"
  local sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >/dev/null
}

need_packages=()
command -v cmake >/dev/null || need_packages+=(cmake)
command -v ninja >/dev/null || need_packages+=(ninja-build)
command -v g++ >/dev/null || need_packages+=(g++)
command -v python3 >/dev/null || need_packages+=(python3)
# pip and venv: the wheel (pip install ., tests/install/run-install-tests.sh).
python3 -m pip --version >/dev/null 2>&1 || need_packages+=(python3-pip)
python3 -c 'import ensurepip' >/dev/null 2>&1 || need_packages+=(python3-venv)
[ -f /usr/include/spdlog/spdlog.h ] || need_packages+=(libspdlog-dev)
[ -f /usr/include/fmt/format.h ] || need_packages+=(libfmt-dev)
[ -f /usr/include/catch2/catch.hpp ] || need_packages+=(catch2)
[ ${#need_packages[@]} -eq 0 ] || install_packages "${need_packages[@]}"

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda_home/bin/nvcc" ]; then
  echo "setup: no nvcc at $cuda_home/bin/nvcc; install the CUDA toolkit or set CUDA_HOME" >&2
  exit 1
fi

# "2.32.3" for the NCCL_VERSION_CODE of FOLDER/include/nccl.h, "" when there is none.
header_version() {
  local code
  code=$(sed -n 's/^#define NCCL_VERSION_CODE \([0-9][0-9]*\).*/\1/p' "$1/include/nccl.h" 2>/dev/null || true)
  [ -n "$code" ] && echo "$((code / 10000)).$((code / 100 % 100)).$((code % 100))"
  return 0
}

# VERSION PLATFORM SHA256: that wheel's nccl.h into .deps/nccl-VERSION/include.
fetch_header() {
  local version=$1 platform=$2 sha256=$3
  local target="$root/.deps/nccl-$version/include" download="$root/.deps/download-nccl-$version"
  local started=$SECONDS
  echo "setup: fetching nccl.h $version from PyPI (nvidia-nccl-cu13 $version, a 200-300 MB wheel, once)"
  rm -rf "$download"
  mkdir -p "$download" "$target"
  python3 -m pip --version >/dev/null 2>&1 || install_packages python3-pip
  if ! python3 -m pip download -q --no-deps --only-binary=:all: --platform "$platform" -d "$download" \
      "nvidia-nccl-cu13==$version"; then
    echo "setup: cannot fetch nvidia-nccl-cu13 $version (offline?); set NCCL_HOME to a folder whose" \
         "include/nccl.h to build against (NCCL_HOME=$cuda_home for CUDA's, if it has one)" >&2
    exit 1
  fi
  local wheel
  wheel=$(echo "$download"/*.whl)
  echo "$sha256  $wheel" | sha256sum --check --quiet -
  python3 - "$wheel" "$target/nccl.h.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open("nvidia/nccl/include/nccl.h") as header, \
        open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(header, out)
PY
  mv "$target/nccl.h.part" "$target/nccl.h"
  rm -rf "$download"
  echo "setup: nccl.h $version in $target ($((SECONDS - started)) s)"
}

# The folder (with include/nccl.h) of NCCL VERSION: fetched before, else CUDA's when it is
# that version, else fetched now.
nccl_home_for() {
  local version=$1 platform=$2 sha256=$3
  if [ ! -f "$root/.deps/nccl-$version/include/nccl.h" ]; then
    if [ "$(header_version "$cuda_home")" = "$version" ]; then
      echo "$cuda_home"
      return
    fi
    fetch_header "$version" "$platform" "$sha256" >&2
  fi
  echo "$root/.deps/nccl-$version"
}

if [ -n "${NCCL_HOME:-}" ]; then
  if [ ! -f "$NCCL_HOME/include/nccl.h" ]; then
    echo "setup: NCCL_HOME=$NCCL_HOME has no include/nccl.h" >&2
    exit 1
  fi
  nccl_home=$NCCL_HOME
else
  nccl_home=$(nccl_home_for "$NCCL_HEADER_VERSION" "$NCCL_HEADER_WHEEL_PLATFORM" "$NCCL_HEADER_WHEEL_SHA256")
fi
echo "$nccl_home" > "$root/.deps-nccl-home"
echo "setup: CUDA at $cuda_home, nccl.h $(header_version "$nccl_home") at $nccl_home/include"

if [ "${1:-}" = "--other-api-level" ]; then
  # The pinned level that the main build is not.
  if [ "$(header_version "$nccl_home")" = "$NCCL_HEADER_VERSION" ]; then
    other=$(nccl_home_for "$NCCL_OTHER_HEADER_VERSION" "$NCCL_OTHER_HEADER_WHEEL_PLATFORM" \
      "$NCCL_OTHER_HEADER_WHEEL_SHA256")
  else
    other=$(nccl_home_for "$NCCL_HEADER_VERSION" "$NCCL_HEADER_WHEEL_PLATFORM" "$NCCL_HEADER_WHEEL_SHA256")
  fi
  echo "$other" > "$root/.deps-nccl-other-home"
  echo "setup: second API level: nccl.h $(header_version "$other") at $other/include"
fi
