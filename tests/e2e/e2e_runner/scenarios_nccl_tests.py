"""nccl-tests' all_reduce_perf -c 1 (it checks every result bit for bit) through the
library: on the one-GPU rig (one MPI process per rank, all on GPU 0 under MPS) and on a
machine with several GPUs (one MPI process per GPU, one process with every GPU, threads).
ALL_REDUCE_PERF names an MPI build of it."""

import functools
import os
import sys

from . import verdicts_frameworks as verdicts
from .scenario import register
from .tools_path import NCCL_CAR_TOOL

RANK_HOST_ID = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank_host_id.py")
# Seconds one all_reduce_perf run may take.
_RIG_RUN_LIMIT = 150
_GPUS_RUN_LIMIT = 180


def mpirun_command(processes, passed_on, **settings):
    """mpirun of `processes` ranks that hands them the variables named in `passed_on` as they
    are in mpirun's environment, and `settings` as given."""
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(processes)]
    for name in passed_on:
        argv += ["-x", name]
    for name, value in settings.items():
        argv += ["-x", f"{name}={value}"]
    return argv


def rig(context, ranks):
    """-b 16 -e 16M in each type, eager and in a CUDA graph (NT_DTYPES, NT_GRAPH narrow it)."""
    perf = context.machine.all_reduce_perf
    env = context.rig_env()
    passed_on = ("LD_LIBRARY_PATH", "NCCL_SOCKET_IFNAME", "NCCL_NVLS_ENABLE", "CUDA_MPS_PIPE_DIRECTORY")
    launcher = mpirun_command(ranks, passed_on, LD_PRELOAD=context.build.library, NCCL_TESTS_DEVICE=0,
                              NCCL_CAR_DEBUG="INFO", NCCL_CAR_MAX_BLOCKS=context.rig_blocks(ranks))
    with context.mps():
        for dtype in context.machine.env.get("NT_DTYPES", "half bfloat16 float").split():
            for graph in context.machine.env.get("NT_GRAPH", "0 10").split():
                context.restart_mps()
                run = context.run_one(f"nt-n{ranks}-{dtype}-G{graph}",
                                      launcher + [sys.executable, RANK_HOST_ID, perf, "-b", "16", "-e", "16M", "-f",
                                                  "4", "-d", dtype, "-c", "1", "-n", "5", "-w", "2", "-G", graph],
                                      env, _RIG_RUN_LIMIT)
                yield f"{ranks} ranks {dtype} -G {graph}", verdicts.nccl_tests(run.returncode, run.text,
                                                                                min_eligible=ranks)


_SIZES = ["-b", "4", "-e", "64M", "-f", "4", "-c", "1", "-n", "5", "-w", "2"]


def _gpus_env(context):
    env = context.gpu_rank_env()
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def _record_topology(context):
    """What links the GPUs, and what doctor makes of this machine, beside the logs."""
    context.run_one("topology", ["nvidia-smi", "topo", "-m"], context.gpu_env(), 60)
    context.run_one("doctor", [sys.executable, NCCL_CAR_TOOL, "doctor"],
                    dict(context.gpu_env(), NCCL_CAR_LIB=context.build.library), 120)
    context.say(f"  topology and doctor: {context.log('topology')}, {context.log('doctor')}")


def _gpus_runs(context, runs):
    for name, argv in runs:
        run = context.run_one(f"nt-{name}", argv, _gpus_env(context), _GPUS_RUN_LIMIT)
        yield name, verdicts.nccl_tests(run.returncode, run.text)


def gpus_mpi(context):
    """One MPI process per GPU: each type eager and -G 10, then every op and type."""
    _record_topology(context)
    gpus = context.machine.gpus
    launcher = mpirun_command(gpus, ("LD_PRELOAD", "LD_LIBRARY_PATH", "NCCL_NVLS_ENABLE", "NCCL_CAR_DEBUG"))
    perf = context.machine.all_reduce_perf
    runs = [(f"mpi-{dtype}-G{graph}", launcher + [perf] + _SIZES + ["-d", dtype, "-G", graph, "-g", "1"])
            for dtype in ("half", "bfloat16", "float") for graph in ("0", "10")]
    runs.append(("mpi-all-ops-all-types", launcher + [perf] + _SIZES + ["-o", "all", "-d", "all", "-g", "1"]))
    yield from _gpus_runs(context, runs)


def gpus_one_process(context, option, name, types):
    """One process for every GPU, all driven from one thread (-g N) or one thread each
    (-t N): the first type eager, the second in a CUDA graph."""
    gpus = str(context.machine.gpus)
    perf = context.machine.all_reduce_perf
    eager, graph = types
    yield from _gpus_runs(context, [(f"{name}{gpus}-{eager}", [perf] + _SIZES + ["-d", eager, option, gpus]),
                                    (f"{name}{gpus}-{graph}-G10",
                                     [perf] + _SIZES + ["-d", graph, option, gpus, "-G", "10"])])


for _ranks in (2, 4, 8):
    register(f"nccl-tests-{_ranks}ranks", f"all_reduce_perf -c 1, {_ranks} MPI processes on one GPU",
             ("gpu", "mps", "nccl", "mpirun", "nccl-tests"), 1200, functools.partial(rig, ranks=_ranks))
register("multi-gpu-nccl-tests-mpi", "all_reduce_perf -c 1, one MPI process per GPU",
         ("2 gpus", "nccl", "mpirun", "nccl-tests"), 1500, gpus_mpi)
register("multi-gpu-nccl-tests-one-process", "all_reduce_perf -c 1 -g N: one process drives every GPU",
         ("2 gpus", "nccl", "nccl-tests"), 400,
         functools.partial(gpus_one_process, option="-g", name="one-process-g", types=("bfloat16", "float")))
register("multi-gpu-nccl-tests-threads", "all_reduce_perf -c 1 -t N: one thread per GPU",
         ("2 gpus", "nccl", "nccl-tests"), 400,
         functools.partial(gpus_one_process, option="-t", name="threads-t", types=("float", "half")))
