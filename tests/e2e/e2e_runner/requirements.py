"""What a scenario needs from the machine and the build, each with the reason it is skipped
without it. Checked in the order a scenario lists them, so list the GPU first: a machine
without one says just that."""

import os

from .machine import ALL_REDUCE_PERF, NCCL_TESTS_PROGRAMS


def _at_least_gpus(count):
    def check(machine, build):
        found = machine.gpus
        if found >= count:
            return None
        return f"needs {'a GPU' if count == 1 else f'{count} GPUs'}, {found or 'none'} visible"
    return check


def _command(name, hint):
    def check(machine, build):
        return None if machine.command(name) else f"no {name} on PATH ({hint})"
    return check


def _module(name, hint):
    def check(machine, build):
        return None if machine.has_module(name) else f"{machine.python} cannot import {name} ({hint})"
    return check


def _nccl(machine, build):
    return None if machine.nccl_lib_dir else "no libnccl.so.2 found: set NCCL_HOME, or install the NCCL wheel"


def _nccl_at_least(code, text):
    def check(machine, build):
        version = machine.nccl_version
        if version and version >= code:
            return None
        return f"needs NCCL {text} or newer underneath (found {version or 'none'}; NCCL_HOME names another)"
    return check


def _programs(machine, build):
    program = build.program("allreduce_e2e")
    return None if os.access(program, os.X_OK) else (f"{program} is not built (CMake found no libnccl "
                                                     "when it configured the build)")


def _nccl_tests(program):
    def check(machine, build):
        if machine.nccl_tests_program(program):
            return None
        where = machine.nccl_tests_path(program)
        if where:
            return f"no {program}: {where} is not an executable (set {program.upper()} to an MPI build's {program})"
        beside = "" if program == ALL_REDUCE_PERF else ", or ALL_REDUCE_PERF to the all_reduce_perf it was built beside"
        return (f"no nccl-tests: set {program.upper()} to an MPI build's {program}{beside} (or the CMake cache "
                "variable ALL_REDUCE_PERF)")
    return check


CHECKS = {
    "gpu": _at_least_gpus(1),
    "2 gpus": _at_least_gpus(2),
    "3 gpus": _at_least_gpus(3),
    "mps": _command("nvidia-cuda-mps-control", "the CUDA driver's MPS"),
    "nccl": _nccl,
    "nccl 2.32": _nccl_at_least(23200, "2.32"),
    "e2e programs": _programs,
    "mpirun": _command("mpirun", "an MPI such as Open MPI"),
    # nccl-tests' programs (machine.py: each by its variable, or beside all_reduce_perf).
    **{program: _nccl_tests(program) for program in NCCL_TESTS_PROGRAMS},
    "torch": _module("torch", "PyTorch with CUDA"),
    "torchrun": _command("torchrun", "PyTorch's launcher"),
    "jax": _module("jax", "python3 -m pip install 'jax[cuda12]'"),
    "compute-sanitizer": _command("compute-sanitizer", "the CUDA toolkit's"),
}


def missing(needs, machine, build):
    """Why a scenario needing `needs` cannot run here, or None when it can."""
    for need in needs:
        reason = CHECKS[need](machine, build)
        if reason:
            return reason
    return None


def labels(needs):
    """ctest labels: every scenario is e2e; gpu when it needs one, multi-gpu when it needs more."""
    found = ["e2e"]
    if any(need.endswith("gpu") or need.endswith("gpus") for need in needs):
        found.append("gpu")
    if "2 gpus" in needs or "3 gpus" in needs:
        found.append("multi-gpu")
    return found
