"""The environments the runs start in.

A machine with GPUs: the real NCCL first on the library path and NVLink multicast off (the
lent machines want it off). The one-GPU rig (docs/design.md, "Testing without a multi-GPU
machine"): several ranks as processes on one GPU, under MPS so that their kernels run at
once, each with its own NCCL_HOSTID so that NCCL accepts two ranks on one GPU, talking over
sockets on loopback."""

import os

# Blocks a pull kernel uses at most; the rig gives no rank more.
_PULL_KERNEL_BLOCKS = 36
# Where the rig's MPS daemon keeps its pipe and log, unless the caller chose.
MPS_PIPE_DIRECTORY = "/tmp/nccl-car-mps-pipe"
MPS_LOG_DIRECTORY = "/tmp/nccl-car-mps-log"


def gpu_machine(base, nccl_lib_dir):
    env = dict(base)
    env["LD_LIBRARY_PATH"] = ":".join(part for part in (nccl_lib_dir, base.get("LD_LIBRARY_PATH")) if part)
    env["NCCL_NVLS_ENABLE"] = "0"
    return env


def rig(base, nccl_lib_dir):
    env = gpu_machine(base, nccl_lib_dir)
    env["NCCL_SOCKET_IFNAME"] = "lo"
    env.setdefault("CUDA_MPS_PIPE_DIRECTORY", MPS_PIPE_DIRECTORY)
    env.setdefault("CUDA_MPS_LOG_DIRECTORY", MPS_LOG_DIRECTORY)
    # Not CUDA_DEVICE_MAX_CONNECTIONS=32 (as the in-process GPU tests set it): under MPS each
    # client's extra hardware queues come out of one shared pool, and 4 such clients
    # already failed with "out of memory".
    env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    # Several ranks share the GPU's multiprocessors: with programmatic dependent launch a
    # rank's next kernel may hold some while it waits, and a peer's current kernel could then
    # find none (rig_blocks leaves room for one grid per rank, not two).
    env["NCCL_CAR_PDL"] = "0"
    return env


def rig_blocks(multiprocessors, ranks):
    """NCCL_CAR_MAX_BLOCKS for `ranks` processes on one GPU: every rank's blocks must be
    resident at once, since a kernel of ours waits for its peers' kernels."""
    return max(1, min(_PULL_KERNEL_BLOCKS, multiprocessors // ranks))


def with_nccl_home_first(env, base):
    """PyTorch's and JAX's libraries load the NCCL of their own wheel by its path (RPATH),
    before LD_LIBRARY_PATH. Where NCCL_HOME names another NCCL (nccl-version-check.sh), it is
    preloaded after the library: the loader then finds a libnccl.so.2 already loaded, and
    every NCCL call of the framework reaches the library, then that NCCL."""
    home = base.get("NCCL_HOME")
    real = os.path.join(home, "lib", "libnccl.so.2") if home else None
    if not real or not os.path.isfile(real):
        return env
    return dict(env, LD_PRELOAD=" ".join(part for part in (env.get("LD_PRELOAD"), real) if part))


def with_library(env, library, **settings):
    """`env` with the library preloaded and NCCL_CAR_DEBUG=INFO (the verdicts read INFO
    lines), plus `settings` (NAME=value; None leaves a variable out)."""
    result = dict(env, LD_PRELOAD=library, NCCL_CAR_DEBUG="INFO")
    result.update({name: str(value) for name, value in settings.items() if value is not None})
    return result
