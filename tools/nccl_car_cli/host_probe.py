"""Facts about this host that decide whether ranks can share GPU memory: MPS, the IPC
namespace, containers, /dev/shm and the open-file limit."""

import os
import re
import resource
import stat

# The inode of the first IPC namespace the kernel creates (PROC_IPC_INIT_INO): a process
# in it shares IPC with the host; in another one, only with processes in the same one.
HOST_IPC_NAMESPACE_INODE = 4026531839
_CONTAINER_CGROUP = re.compile(r"docker|kubepods|containerd|libpod|lxc|podman")


def mps_status(env, proc_root="/proc"):
    """{running, evidence}: MPS is taken to run when its control pipe exists or an
    nvidia-cuda-mps-control process does."""
    pipe_folder = env.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps"
    control = os.path.join(pipe_folder, "control")
    try:
        if stat.S_ISFIFO(os.stat(control).st_mode):
            return {"running": True, "evidence": f"control pipe {control}"}
    except OSError:
        pass
    for pid in _pids(proc_root):
        try:
            with open(os.path.join(proc_root, pid, "cmdline"), "rb") as cmdline:
                program = cmdline.read().split(b"\0")[0]
        except OSError:
            continue  # the process ended, or is not ours to read
        if os.path.basename(program) == b"nvidia-cuda-mps-control":
            return {"running": True, "evidence": f"nvidia-cuda-mps-control is process {pid}"}
    return {"running": False, "evidence": f"no control pipe in {pipe_folder}, no "
                                          "nvidia-cuda-mps-control process"}


def _pids(proc_root):
    try:
        return [name for name in os.listdir(proc_root) if name.isdigit()]
    except OSError:
        return []


def container_evidence(env, root="/"):
    """Why this looks like a container, or None."""
    for marker in (".dockerenv", "run/.containerenv"):
        if os.path.exists(os.path.join(root, marker)):
            return f"/{marker} exists"
    if env.get("container"):
        return f"container={env['container']} is set"
    try:
        with open(os.path.join(root, "proc/1/cgroup")) as cgroup:
            match = _CONTAINER_CGROUP.search(cgroup.read())
    except OSError:
        match = None
    return f"/proc/1/cgroup mentions {match.group(0)}" if match else None


def ipc_facts(env):
    facts = {"ipc_namespace": None, "host_ipc_namespace": None,
             "container": container_evidence(env), "dev_shm_bytes": None,
             "open_files_soft": None, "open_files_hard": None}
    try:
        namespace = os.readlink("/proc/self/ns/ipc")   # "ipc:[4026531839]"
        facts["ipc_namespace"] = namespace
        inode = re.search(r"\[(\d+)\]", namespace)
        facts["host_ipc_namespace"] = bool(inode) and int(inode.group(1)) == HOST_IPC_NAMESPACE_INODE
    except OSError:
        pass
    try:
        shm = os.statvfs("/dev/shm")
        facts["dev_shm_bytes"] = shm.f_frsize * shm.f_blocks
    except OSError:
        pass
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    facts["open_files_soft"] = "unlimited" if soft == resource.RLIM_INFINITY else soft
    facts["open_files_hard"] = "unlimited" if hard == resource.RLIM_INFINITY else hard
    return facts
