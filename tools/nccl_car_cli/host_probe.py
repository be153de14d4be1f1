"""Facts about this host besides its GPUs (gpu_probe.py): whether ranks can share GPU memory
(MPS, the IPC namespace, containers, /dev/shm, the open-file limit), and which libnccl.so.2
the library would forward to, with its version.

The NCCL search order is the library's: NCCL_CAR_NCCL_LIB, the dynamic loader's
"libnccl.so.2", PyTorch's wheel (<site-packages>/nvidia/nccl/lib, found on sys.path without
importing torch), then /usr/local/cuda/lib64. The first one that loads, and is not
libnccl-car.so itself (a drop-in folder on LD_LIBRARY_PATH), is the answer."""

import ctypes
import os
import re
import resource
import stat

from . import paths

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


# The real NCCL.
NCCL_SONAME = "libnccl.so.2"
CUDA_FOLDER_LIBRARY = "/usr/local/cuda/lib64/libnccl.so.2"


def nccl_candidates(env, search_path):
    """[(where it comes from, path or soname)] in search order, paths not checked yet."""
    found = []
    if env.get("NCCL_CAR_NCCL_LIB"):
        found.append(("NCCL_CAR_NCCL_LIB", env["NCCL_CAR_NCCL_LIB"]))
    found.append(("the dynamic loader", NCCL_SONAME))
    for folder in search_path:
        wheel_library = os.path.join(folder or ".", "nvidia", "nccl", "lib", NCCL_SONAME)
        if os.path.isfile(wheel_library):
            found.append(("a Python wheel (PyTorch's NCCL)", wheel_library))
    found.append(("the CUDA folder", CUDA_FOLDER_LIBRARY))
    return found


def decode_version(code):
    """ncclGetVersion's integer: 22703 is 2.27.3 (2.9 and later), 2804 is 2.8.4."""
    if code >= 20900:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def encode_version(text):
    """decode_version's inverse for 2.9 and later: "2.28.9" is 22809; None for anything else."""
    parts = text.split(".") if text else []
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    major, minor, patch = map(int, parts)
    return major * 10000 + minor * 100 + patch if (major, minor) >= (2, 9) else None


# What libnccl-car.so carries as text (shim/exports/real_nccl.cc): the nccl.h it was built against.
_BUILT_AGAINST = re.compile(rb"nccl-car: built against nccl\.h ([0-9]+\.[0-9]+\.[0-9]+)")


def header_version_of(library):
    """"2.32.3": the nccl.h libnccl-car.so was built against, read from its file; None when
    the file is missing or older than that text."""
    try:
        with open(library, "rb") as stream:
            match = _BUILT_AGAINST.search(stream.read())
    except OSError:
        return None
    return match[1].decode() if match else None


def header_note(real_version, header_version):
    """("warning" or "note", text) when the real NCCL and the library's nccl.h differ, else None."""
    if not real_version or not header_version or real_version == header_version:
        return None
    real, header = (tuple(int(part) for part in v.split(".")) for v in (real_version, header_version))
    if real > header:
        return ("warning", f"NCCL {real_version} is newer than the nccl.h {header_version} libnccl-car.so was built "
                           f"against: the functions NCCL added after {header_version} reach NCCL past the library, "
                           f"among them any it hooks when built against a newer nccl.h (ncclCommGrow, "
                           f"ncclCommSuspend: our side would not see them); rebuild against NCCL {real_version}'s "
                           f"nccl.h (NCCL_HOME=<its folder> scripts/build.sh)")
    return ("note", f"NCCL {real_version} is older than the nccl.h {header_version} libnccl-car.so was built "
                    f"against: the library's hooks of functions added after {real_version} return "
                    f"ncclInvalidUsage, one WARN each; the other functions are NCCL's own")


def _loaded_path(library):
    """The file the loader picked for a soname, from this process's memory map."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split(maxsplit=5)[-1].strip()
            if os.path.basename(path).startswith("libnccl.so"):
                return path
    return library


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _file_of(handle):
    """The file a handle's ncclGetVersion comes from (dladdr), or None."""
    try:
        info = _DlInfo()
        address = ctypes.cast(handle.ncclGetVersion, ctypes.c_void_p)
        if ctypes.CDLL(None).dladdr(address, ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    except (AttributeError, OSError, TypeError, ctypes.ArgumentError):
        pass
    return None


def _version_of(handle):
    version = ctypes.c_int()
    if handle.ncclGetVersion(ctypes.byref(version)) != 0:
        return None
    return decode_version(version.value)


def locate_nccl(env, search_path, load=ctypes.CDLL, exclude=None):
    """Returns {path, source, version, error, tried: [{source, target, error}]}; path is
    None when nothing loads. `exclude`: libnccl-car.so, never an answer. `load` is
    injectable for tests."""
    result = {"path": None, "source": None, "version": None, "error": None, "tried": []}
    ours = os.path.realpath(exclude) if exclude else None
    for source, target in nccl_candidates(env, search_path):
        if target != NCCL_SONAME and not os.path.isfile(target):
            result["tried"].append({"source": source, "target": target, "error": "no such file"})
            continue
        # Our front too (a drop-in folder's libnccl.so.2): it loads the library (not even into the tool, then).
        if ours and target != NCCL_SONAME and paths.loads_library(target, ours):
            result["tried"].append({"source": source, "target": target, "error": "is libnccl-car.so itself"})
            continue
        try:
            handle = load(target)
        except OSError as error:
            result["tried"].append({"source": source, "target": target, "error": str(error)})
            continue
        if ours and _file_of(handle) == ours:
            result["tried"].append({"source": source, "target": target, "error": "is libnccl-car.so itself"})
            continue
        result["tried"].append({"source": source, "target": target, "error": None})
        result["source"] = source
        # By name, the file ncclGetVersion comes from: behind a front on LD_LIBRARY_PATH, the real one.
        by_name = target == NCCL_SONAME
        result["path"] = (_file_of(handle) or _loaded_path(target)) if by_name else os.path.abspath(target)
        try:
            result["version"] = _version_of(handle)
        except AttributeError:
            result["error"] = "it has no ncclGetVersion: not NCCL?"
        return result
    result["error"] = "no libnccl.so.2 could be loaded"
    return result
