"""nccl-tests' all_reduce_perf -c 1 (it checks every result bit for bit) through the
library: on the one-GPU rig (one MPI process per rank, all on GPU 0 under MPS) and on a
machine with several GPUs (one MPI process per GPU, one process with every GPU, threads);
and every built-in op on every type at odd sizes, on the rig and on 2 GPUs.
ALL_REDUCE_PERF names an MPI build of it."""

import functools
import os
import sys
from dataclasses import dataclass

from . import verdicts_frameworks as verdicts
from .scenario import register
from .tools_path import NCCL_CAR_TOOL

RANK_HOST_ID = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank_host_id.py")
# Seconds one all_reduce_perf run may take.
_RIG_RUN_LIMIT = 150
_GPUS_RUN_LIMIT = 180
_EVERY_OP_RUN_LIMIT = 300


def mpirun_command(processes, passed_on, **settings):
    """mpirun of `processes` ranks that hands them the variables named in `passed_on` as they
    are in mpirun's environment, and `settings` as given."""
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(processes)]
    for name in passed_on:
        argv += ["-x", name]
    for name, value in settings.items():
        argv += ["-x", f"{name}={value}"]
    return argv


def _rig_launcher(context, ranks):
    """mpirun of `ranks` ranks on GPU 0 with the library, each through rank_host_id.py."""
    passed_on = ("LD_LIBRARY_PATH", "NCCL_SOCKET_IFNAME", "NCCL_NVLS_ENABLE", "CUDA_MPS_PIPE_DIRECTORY")
    return mpirun_command(ranks, passed_on, LD_PRELOAD=context.build.library, NCCL_TESTS_DEVICE=0,
                          NCCL_CAR_DEBUG="INFO", NCCL_CAR_MAX_BLOCKS=context.rig_blocks(ranks)) + \
        [sys.executable, RANK_HOST_ID]


def rig(context, ranks):
    """-b 16 -e 16M in each type, eager and in a CUDA graph (NT_DTYPES, NT_GRAPH narrow it)."""
    perf = context.machine.all_reduce_perf
    env = context.rig_env()
    launcher = _rig_launcher(context, ranks)
    with context.mps():
        for dtype in context.machine.env.get("NT_DTYPES", "half bfloat16 float").split():
            for graph in context.machine.env.get("NT_GRAPH", "0 10").split():
                context.restart_mps()
                run = context.run_one(f"nt-n{ranks}-{dtype}-G{graph}",
                                      launcher + [perf, "-b", "16", "-e", "16M", "-f", "4", "-d", dtype, "-c", "1",
                                                  "-n", "5", "-w", "2", "-G", graph],
                                      env, _RIG_RUN_LIMIT)
                yield f"{ranks} ranks {dtype} -G {graph}", verdicts.nccl_tests(run.returncode, run.text, ranks)


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
    """Each (name, argv) run, one communicator rank per GPU."""
    for name, argv in runs:
        run = context.run_one(f"nt-{name}", argv, _gpus_env(context), _GPUS_RUN_LIMIT)
        yield name, verdicts.nccl_tests(run.returncode, run.text, context.machine.gpus)


# What mpirun hands each rank on a machine with a GPU per rank (the library comes in the
# environment, _gpus_env).
_GPUS_PASSED_ON = ("LD_PRELOAD", "LD_LIBRARY_PATH", "NCCL_NVLS_ENABLE", "NCCL_CAR_DEBUG")


def gpus_mpi(context):
    """One MPI process per GPU: each type eager and -G 10, then every op and type."""
    _record_topology(context)
    gpus = context.machine.gpus
    launcher = mpirun_command(gpus, _GPUS_PASSED_ON)
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


# nccl-tests' -o all also runs "mulsum", an op made by ncclRedOpCreatePreMulSum: not one of
# NCCL's built-in ops, so the library leaves it to NCCL (forward reason "op"). Each built-in op
# gets a run of its own instead, so that any call forwarded for a reason but too-large fails.
BUILT_IN_OPS = ("sum", "prod", "max", "min", "avg")


@dataclass(frozen=True)
class Sweep:
    """all_reduce_perf -b FIRST -e LAST -i STEP [-u UNALIGN]: sizes in bytes (a type whose
    element does not divide a size runs the whole elements that fit: count = size / element
    size); UNALIGN elements past the aligned buffers, when not 0."""
    name: str
    first: int
    last: int
    step: int
    unalign: int = 0

    @property
    def arguments(self):
        unalign = ["-u", str(self.unalign)] if self.unalign else []
        return ["-b", str(self.first), "-e", str(self.last), "-i", str(self.step)] + unalign

    @property
    def sizes(self):
        """Rows all_reduce_perf prints for each type."""
        return (self.last - self.first) // self.step + 1


SWEEPS = (
    # 4 B to 9 MiB by 999,997 bytes: 10 sizes, every other one odd, across the 8 MiB limit;
    # the first holds no whole 8-byte element (count 0).
    Sweep("odd", 4, 9 << 20, 999997),
    # 24 B to 4776 B by 48 bytes: 100 sizes, each 8 bytes past a multiple of 16 (whole elements
    # of every type, never whole 16-byte packs).
    Sweep("small", 24, 4800, 48),
    # 4 B to 1 MiB by 16,411 bytes (a prime), the buffers one element past aligned: 64 sizes
    # of every remainder modulo 16, at addresses no kernel may assume aligned.
    Sweep("unaligned", 4, 1 << 20, 16411, unalign=1),
)
# One timed iteration, no warm-up, one checked iteration: every size still reaches the
# library three times, out of place and in place.
_ONCE = ["-n", "1", "-w", "0", "-c", "1"]


def _sweeps(context):
    """SWEEPS, less the unaligned one where this all_reduce_perf has no -u (an older one
    would print its usage and stop)."""
    if context.machine.all_reduce_perf_has("unalign"):
        return SWEEPS
    context.say("  all_reduce_perf has no -u (--unalign): the unaligned sweep is left out")
    return tuple(sweep for sweep in SWEEPS if not sweep.unalign)


def every_op_runs(context, launcher, name):
    """Each sweep with each built-in op over every type (-d all): one run each."""
    perf = context.machine.all_reduce_perf
    for sweep in _sweeps(context):
        for op in BUILT_IN_OPS:
            argv = launcher + [perf] + sweep.arguments + ["-d", "all", "-o", op] + _ONCE
            yield sweep, op, f"{name}-{sweep.name}-{op}", argv


def rig_every_op(context, ranks):
    """Every built-in op on every type, odd, small and unaligned sizes, `ranks` processes on
    GPU 0."""
    env = context.rig_env()
    with context.mps():
        for sweep, op, name, argv in every_op_runs(context, _rig_launcher(context, ranks), f"nt-ops-n{ranks}"):
            context.restart_mps()
            run = context.run_one(name, argv, env, _EVERY_OP_RUN_LIMIT)
            yield f"{ranks} ranks, {sweep.name} sizes, {op}", verdicts.nccl_tests_every_type(
                run.returncode, run.text, op, sweep.sizes, ranks)


def gpus_every_op(context):
    """Every built-in op on every type, odd, small and unaligned sizes, one MPI process on
    each of GPUs 0 and 1."""
    launcher = mpirun_command(2, _GPUS_PASSED_ON)
    for sweep, op, name, argv in every_op_runs(context, launcher, "nt-ops-gpus2"):
        run = context.run_one(name, argv + ["-g", "1"], _gpus_env(context), _EVERY_OP_RUN_LIMIT)
        yield f"2 GPUs, {sweep.name} sizes, {op}", verdicts.nccl_tests_every_type(run.returncode, run.text, op,
                                                                                   sweep.sizes, 2)


for _ranks in (2, 4, 8):
    register(f"nccl-tests-{_ranks}ranks", f"all_reduce_perf -c 1, {_ranks} MPI processes on one GPU",
             ("gpu", "mps", "nccl", "mpirun", "nccl-tests"), 1200, functools.partial(rig, ranks=_ranks))
for _ranks in (2, 3, 4):
    register(f"nccl-tests-all-ops-{_ranks}ranks",
             f"all_reduce_perf -c 1 -d all, each built-in op, odd, small and unaligned sizes, {_ranks} MPI "
             "processes on one GPU", ("gpu", "mps", "nccl", "mpirun", "nccl-tests"), 3000,
             functools.partial(rig_every_op, ranks=_ranks))
register("multi-gpu-nccl-tests-mpi", "all_reduce_perf -c 1, one MPI process per GPU",
         ("2 gpus", "nccl", "mpirun", "nccl-tests"), 1500, gpus_mpi)
register("multi-gpu-nccl-tests-all-ops",
         "all_reduce_perf -c 1 -d all, each built-in op, odd, small and unaligned sizes, one MPI process on each of "
         "2 GPUs", ("2 gpus", "nccl", "mpirun", "nccl-tests"), 3000, gpus_every_op)
register("multi-gpu-nccl-tests-one-process", "all_reduce_perf -c 1 -g N: one process drives every GPU",
         ("2 gpus", "nccl", "nccl-tests"), 400,
         functools.partial(gpus_one_process, option="-g", name="one-process-g", types=("bfloat16", "float")))
register("multi-gpu-nccl-tests-threads", "all_reduce_perf -c 1 -t N: one thread per GPU",
         ("2 gpus", "nccl", "nccl-tests"), 400,
         functools.partial(gpus_one_process, option="-t", name="threads-t", types=("float", "half")))
