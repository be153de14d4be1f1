"""What this machine offers the end-to-end runs: GPUs, MPS, the real NCCL, MPI, nccl-tests,
PyTorch, JAX, compute-sanitizer. Each fact is looked up once, when first asked for; a
scenario that needs something missing is skipped, saying what was missing."""

import os
import shutil
import subprocess

# The first libnccl.so.2 of an NCCL wheel on that Python's path, in path order.
_FIND_NCCL_WHEEL = """
import glob, sys
hits = [hit for base in sys.path for hit in glob.glob(base + "/nvidia/nccl/lib/libnccl.so.2")]
print(hits[0] if hits else "")
"""
# The NCCL_VERSION_CODE of a libnccl.so.2 (argv[1]), asked in a process of its own.
_ASK_NCCL_VERSION = """
import ctypes, sys
version = ctypes.c_int()
assert ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(version)) == 0
print(version.value)
"""
# GPU 0's multiprocessor count from the CUDA driver (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
# is 16), asked in a process of its own: the runner itself never becomes a CUDA client.
_ASK_MULTIPROCESSORS = """
import ctypes
cuda = ctypes.CDLL("libcuda.so.1")
device, count = ctypes.c_int(), ctypes.c_int()
assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
assert cuda.cuDeviceGetAttribute(ctypes.byref(count), 16, device) == 0
print(count.value)
"""
# Multiprocessors assumed when the driver cannot say (an H200 has 132).
_DEFAULT_MULTIPROCESSORS = 132
# The nccl-tests programs the scenarios run; the others are found beside all_reduce_perf
# (Machine.nccl_tests_path).
ALL_REDUCE_PERF = "all_reduce_perf"
NCCL_TESTS_PROGRAMS = (ALL_REDUCE_PERF, "all_gather_perf", "reduce_scatter_perf")


def _python_answers(python, code, env):
    """What `python -c code` prints, or None when it fails (the module is missing)."""
    try:
        done = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


class Machine:
    """The facts, from the environment `env` (os.environ by default). Tests replace the
    probing methods to describe a machine they do not have."""

    def __init__(self, env=None, all_reduce_perf=None):
        self.env = dict(os.environ if env is None else env)
        self.python = self.env.get("E2E_PYTHON", "python3")  # the one that has PyTorch, JAX
        self._all_reduce_perf = self.env.get("ALL_REDUCE_PERF") or all_reduce_perf
        self._cache = {}

    def _once(self, name, probe):
        if name not in self._cache:
            self._cache[name] = probe()
        return self._cache[name]

    def command(self, name):
        """The program's path on PATH, or None."""
        return self._once("command " + name, lambda: shutil.which(name, path=self.env.get("PATH")))

    @property
    def gpus(self):
        """GPUs a CUDA program here sees: CUDA_VISIBLE_DEVICES when set (nvidia-smi ignores
        it), else every whole GPU nvidia-smi lists (its MIG lines are indented)."""
        return self._once("gpus", self._count_gpus)

    def _count_gpus(self):
        visible = self.env.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            return len([entry for entry in visible.split(",") if entry.strip()])
        if self.command("nvidia-smi") is None:
            return 0
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, env=self.env)
        except (OSError, subprocess.TimeoutExpired):
            return 0
        return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU"))

    @property
    def multiprocessors(self):
        """GPU 0's multiprocessor count: RIG_SMS, else the CUDA driver's answer. Read before
        MPS starts."""
        return self._once("multiprocessors", self._read_multiprocessors)

    def _read_multiprocessors(self):
        if self.env.get("RIG_SMS", "").isdigit():
            return int(self.env["RIG_SMS"])
        answer = _python_answers(self.python, _ASK_MULTIPROCESSORS, self.env)
        return int(answer) if answer and answer.isdigit() else _DEFAULT_MULTIPROCESSORS

    @property
    def nccl_lib_dir(self):
        """The folder of the libnccl.so.2 to run with: NCCL_HOME/lib, else the NCCL wheel's
        of the Python that has PyTorch; None when there is neither."""
        return self._once("nccl", self._find_nccl)

    def _find_nccl(self):
        home = self.env.get("NCCL_HOME")
        if home and os.path.isfile(os.path.join(home, "lib", "libnccl.so.2")):
            return os.path.join(home, "lib")
        found = _python_answers(self.python, _FIND_NCCL_WHEEL, self.env)
        return os.path.dirname(found) if found else None

    @property
    def nccl_version(self):
        """NCCL_VERSION_CODE of the libnccl.so.2 in nccl_lib_dir (23203 for 2.32.3), or None."""
        return self._once("nccl version", self._read_nccl_version)

    def _read_nccl_version(self):
        if not self.nccl_lib_dir:
            return None
        answer = _python_answers(self.python, _ASK_NCCL_VERSION.replace("sys.argv[1]", repr(os.path.join(
            self.nccl_lib_dir, "libnccl.so.2"))), self.env)
        return int(answer) if answer and answer.isdigit() else None

    def has_module(self, module):
        return self._once("module " + module,
                          lambda: _python_answers(self.python, f"import {module}", self.env) is not None)

    def nccl_tests_path(self, program):
        """Where nccl-tests' `program` (all_reduce_perf, all_gather_perf, reduce_scatter_perf)
        is looked for: the variable of its name in capitals (ALL_GATHER_PERF), else for
        all_reduce_perf the CMake cache variable, for the others the file of that name beside
        all_reduce_perf (nccl-tests builds them all into one folder); None when nothing names
        it."""
        if program == ALL_REDUCE_PERF:
            return self._all_reduce_perf
        named = self.env.get(program.upper())
        if named or not self._all_reduce_perf:
            return named or None
        return os.path.join(os.path.dirname(self._all_reduce_perf), program)

    def nccl_tests_program(self, program):
        """nccl-tests' `program` (an MPI build) as an absolute path, or None where
        nccl_tests_path names no executable."""
        path = self.nccl_tests_path(program)
        return os.path.abspath(path) if path and os.access(path, os.X_OK) else None

    def nccl_tests_has(self, program, option):
        """Whether `program`'s usage (-h, printed before MPI or NCCL starts) names the long
        option `option` (nccl-tests 2.19.6 has "unalign"; older ones may not)."""
        return self._once(f"{program} option {option}", lambda: f"--{option} " in self._nccl_tests_usage(program))

    def _nccl_tests_usage(self, program):
        return self._once(f"{program} usage", lambda: self._read_nccl_tests_usage(program))

    def _read_nccl_tests_usage(self, program):
        env = dict(self.env)
        if self.nccl_lib_dir:  # it asks NCCL for its version first
            env["LD_LIBRARY_PATH"] = ":".join(part for part in (self.nccl_lib_dir, env.get("LD_LIBRARY_PATH")) if part)
        try:
            shown = subprocess.run([self.nccl_tests_program(program), "-h"], env=env, capture_output=True, text=True,
                                   timeout=60)
        except (OSError, subprocess.TimeoutExpired, TypeError):
            return ""
        return shown.stdout + shown.stderr
