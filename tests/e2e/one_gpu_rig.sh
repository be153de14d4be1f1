# Shell helpers for running several NCCL ranks on ONE GPU (see DESIGN.md, "Testing without a
# multi-GPU machine"): MPS so the ranks' kernels run concurrently, a distinct NCCL_HOSTID
# per rank so real NCCL accepts two ranks on one GPU, sockets on loopback between them.
# Source this file; it defines functions only.

rig_start_mps() {
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nccl-car-mps-pipe}
  export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/nccl-car-mps-log}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d 2>/dev/null || true
}

rig_stop_mps() {
  echo quit | nvidia-cuda-mps-control 2>/dev/null || true
  # The control daemon exits asynchronously; wait so a restart does not race it.
  for _ in $(seq 50); do pgrep -f nvidia-cuda-mps >/dev/null 2>&1 || break; sleep 0.1; done
}

# A fresh MPS server for each run: a run's clients then never see a server that an earlier
# run's exit left in a bad state.
rig_restart_mps() {
  rig_stop_mps
  rig_start_mps
}

# The directory of the libnccl.so.2 to run with: NCCL_HOME/lib, else PyTorch's wheel.
rig_nccl_lib_dir() {
  if [ -n "${NCCL_HOME:-}" ] && [ -f "$NCCL_HOME/lib/libnccl.so.2" ]; then echo "$NCCL_HOME/lib"; return; fi
  python3 - <<'PY' 2>/dev/null
import glob, sys
for base in sys.path:
    hits = glob.glob(base + "/nvidia/nccl/lib/libnccl.so.2")
    if hits:
        print(hits[0].rsplit("/", 1)[0]); break
PY
}

# The GPUs a CUDA program here will see: CUDA_VISIBLE_DEVICES when set (nvidia-smi ignores
# it), else every whole GPU nvidia-smi lists (its MIG lines are indented, not counted).
rig_visible_gpus() {
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .
  else
    nvidia-smi -L | grep -c "^GPU"
  fi
}

# gpu_machine_begin: the common start of the scripts for machines with several GPUs: the
# real NCCL on the library path, NVLink multicast off (as the lent machines want), and the
# number of visible GPUs in $gpus.
gpu_machine_begin() {
  export LD_LIBRARY_PATH="$(rig_nccl_lib_dir):${LD_LIBRARY_PATH:-}"
  export NCCL_NVLS_ENABLE=0
  gpus=$(rig_visible_gpus)
}

# rig_taken_calls LOG...: all-reduces our kernels took, summed over the logs' "released:"
# lines ("taken 1shot=A 2shot=B 1stage=C 2stage=D (...)"), every rank counted.
rig_taken_calls() {
  cat "$@" | grep -o "released: taken [^(]*" | grep -o "=[0-9]*" | tr -d = | awk '{s += $1} END {print s + 0}'
}

# Environment every rank of the rig gets (rank-specific parts are added per process).
rig_export_common() {
  export NCCL_SOCKET_IFNAME=lo
  export NCCL_NVLS_ENABLE=0
  # Not CUDA_DEVICE_MAX_CONNECTIONS=32: under MPS each client's extra hardware queues come
  # out of one shared pool, and 4 such clients already failed with "out of memory".
  unset CUDA_DEVICE_MAX_CONNECTIONS
}

# rig_max_blocks N: blocks per rank so that N ranks' blocks all fit on the GPU at once.
# Reads the multiprocessor count once (RIG_SMS), before MPS starts.
rig_max_blocks() {
  if [ -z "${RIG_SMS:-}" ]; then
    RIG_SMS=$(python3 -c 'import torch; print(torch.cuda.get_device_properties(0).multi_processor_count)' 2>/dev/null)
    [ -n "$RIG_SMS" ] || RIG_SMS=132
    export RIG_SMS
  fi
  local blocks=$(( RIG_SMS / $1 ))
  [ $blocks -gt 36 ] && blocks=36
  echo $blocks
}

# rig_begin: the common start of every rig script: real NCCL on the library path, the
# rig's environment, the GPU's size read, MPS up (and down again when the script exits).
rig_begin() {
  local nccl_dir
  nccl_dir=$(rig_nccl_lib_dir)
  [ -n "$nccl_dir" ] || { echo "no libnccl.so.2 found (set NCCL_HOME)"; exit 3; }
  export LD_LIBRARY_PATH="$nccl_dir:${LD_LIBRARY_PATH:-}"
  rig_export_common
  rig_max_blocks 1 >/dev/null  # read the GPU before MPS starts
  rig_start_mps
  trap rig_stop_mps EXIT
}
