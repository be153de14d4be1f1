#!/usr/bin/env bash
# MPS for the one-GPU rig (docs/design.md, "Testing without a multi-GPU machine"): without
# it, the kernels of several processes on one GPU never run at the same time, and ours wait
# for each other forever. The end-to-end runner (run_e2e.py) calls this around its runs.
# Usage: tests/e2e/mps.sh start|stop|restart   (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY)
set -u
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nccl-car-mps-pipe}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/nccl-car-mps-log}

start() {
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d 2>/dev/null || true  # already running is fine
}

stop() {
  echo quit | nvidia-cuda-mps-control 2>/dev/null || true
  # The control daemon exits asynchronously; wait so that a restart does not race it.
  for _ in $(seq 50); do pgrep -f nvidia-cuda-mps >/dev/null 2>&1 || break; sleep 0.1; done
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  *) echo "usage: $0 start|stop|restart" >&2; exit 2 ;;
esac
