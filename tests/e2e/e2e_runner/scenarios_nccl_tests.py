"""nccl-tests' all_reduce_perf, all_gather_perf and reduce_scatter_perf -c 1 (each checks
every result bit for bit) through the library: on the one-GPU rig (one MPI process per rank,
all on GPU 0 under MPS) and on a machine with several GPUs (one MPI process per GPU, one
process with every GPU, threads); and every built-in op (all_gather_perf has none) on every
type at odd sizes, on the rig and on 2 GPUs. ALL_REDUCE_PERF names an MPI build of
all_reduce_perf; the others are found beside it, or by ALL_GATHER_PERF and
REDUCE_SCATTER_PERF (Machine.nccl_tests_path)."""

import fnmatch
import functools
import os
import sys
from dataclasses import dataclass

from . import verdicts_frameworks as verdicts
from .scenario import register
from .tools_path import NCCL_CAR_TOOL

RANK_HOST_ID = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank_host_id.py")
# Seconds one nccl-tests run may take.
_RIG_RUN_LIMIT = 150
_GPUS_RUN_LIMIT = 180
_EVERY_OP_RUN_LIMIT = 300


# nccl-tests' -o all also runs "mulsum", an op made by ncclRedOpCreatePreMulSum: not one of
# NCCL's built-in ops, so the library leaves it to NCCL (forward reason "op"). Each built-in op
# gets a run of its own instead, so that any call forwarded for a reason but too-large fails.
BUILT_IN_OPS = ("sum", "prod", "max", "min", "avg")


@dataclass(frozen=True)
class Perf:
    """One nccl-tests program through the library: the collective it calls (as the library's
    lines and its query program name it), the ops it takes (none for all_gather_perf, which has
    no -o), and the start of its scenarios' names (the all-reduce's came first and keep
    theirs)."""
    program: str
    collective: str
    ops: tuple
    names: str

    def op_arguments(self, op):
        """-o OP, or nothing for a program without ops."""
        return ["-o", op] if self.ops else []

    def row_op(self, op):
        """What the table's redop column shows for a run of OP."""
        return op if self.ops else verdicts.NO_OP

    @property
    def every(self):
        """What its every-type scenarios sweep, as their names say it."""
        return "all-ops" if self.ops else "all-types"


PERFS = (Perf("all_reduce_perf", "all-reduce", BUILT_IN_OPS, "nccl-tests"),
         Perf("all_gather_perf", "all-gather", (), "nccl-tests-all-gather"),
         Perf("reduce_scatter_perf", "reduce-scatter", BUILT_IN_OPS, "nccl-tests-reduce-scatter"))


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


def rig(context, perf, ranks):
    """-b 16 -e 16M in each type, eager and in a CUDA graph (NT_DTYPES, NT_GRAPH narrow it)."""
    program = context.machine.nccl_tests_program(perf.program)
    env = context.rig_env()
    launcher = _rig_launcher(context, ranks)
    with context.mps():
        for dtype in context.machine.env.get("NT_DTYPES", "half bfloat16 float").split():
            for graph in context.machine.env.get("NT_GRAPH", "0 10").split():
                context.restart_mps()
                run = context.run_one(f"nt-n{ranks}-{dtype}-G{graph}",
                                      launcher + [program, "-b", "16", "-e", "16M", "-f", "4", "-d", dtype, "-c", "1",
                                                  "-n", "5", "-w", "2", "-G", graph],
                                      env, _RIG_RUN_LIMIT)
                yield f"{ranks} ranks {dtype} -G {graph}", verdicts.nccl_tests(run.returncode, run.text, ranks,
                                                                              perf.collective, kernels=context.kernels)


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


def _gpus_runs(context, perf, runs):
    """Each (name, argv) run, one communicator rank per GPU."""
    for name, argv in runs:
        run = context.run_one(f"nt-{name}", argv, _gpus_env(context), _GPUS_RUN_LIMIT)
        yield name, verdicts.nccl_tests(run.returncode, run.text, context.machine.gpus, perf.collective,
                                        kernels=context.kernels)


# What mpirun hands each rank on a machine with a GPU per rank (the library comes in the
# environment, _gpus_env).
_GPUS_PASSED_ON = ("LD_PRELOAD", "LD_LIBRARY_PATH", "NCCL_NVLS_ENABLE", "NCCL_CAR_DEBUG")


def gpus_mpi(context, perf):
    """One MPI process per GPU: each type eager and -G 10, then every type (and op)."""
    _record_topology(context)
    gpus = context.machine.gpus
    launcher = mpirun_command(gpus, _GPUS_PASSED_ON)
    program = context.machine.nccl_tests_program(perf.program)
    runs = [(f"mpi-{dtype}-G{graph}", launcher + [program] + _SIZES + ["-d", dtype, "-G", graph, "-g", "1"])
            for dtype in ("half", "bfloat16", "float") for graph in ("0", "10")]
    every = "all-ops-all-types" if perf.ops else "all-types"
    runs.append((f"mpi-{every}", launcher + [program] + _SIZES + perf.op_arguments("all") + ["-d", "all", "-g", "1"]))
    yield from _gpus_runs(context, perf, runs)


def gpus_one_process(context, perf, option, name, types):
    """One process for every GPU, all driven from one thread (-g N) or one thread each
    (-t N): the first type eager, the second in a CUDA graph."""
    gpus = str(context.machine.gpus)
    program = context.machine.nccl_tests_program(perf.program)
    eager, graph = types
    yield from _gpus_runs(context, perf,
                          [(f"{name}{gpus}-{eager}", [program] + _SIZES + ["-d", eager, option, gpus]),
                           (f"{name}{gpus}-{graph}-G10", [program] + _SIZES + ["-d", graph, option, gpus, "-G", "10"])])


@dataclass(frozen=True)
class Sweep:
    """nccl-tests' -b FIRST -e LAST -i STEP [-u UNALIGN]: sizes in bytes (a type whose
    element does not divide a size runs the whole elements that fit: count = size / element
    size; all_gather_perf and reduce_scatter_perf then round each rank's part down to whole
    16 bytes); UNALIGN elements past the aligned buffers, when not 0."""
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
        """Rows the program prints for each type (and op)."""
        return (self.last - self.first) // self.step + 1


SWEEPS = (
    # 4 B to 9 MiB by 999,997 bytes: 10 sizes, every other one odd, across the all-reduce's
    # 8 MiB limit (the others' 1 MiB comes after the second); the first holds no whole 8-byte
    # element (count 0).
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


def _sweeps(context, perf):
    """SWEEPS, less the unaligned one where this program has no -u (an older one would print
    its usage and stop)."""
    if context.machine.nccl_tests_has(perf.program, "unalign"):
        return SWEEPS
    context.say(f"  {perf.program} has no -u (--unalign): the unaligned sweep is left out")
    return tuple(sweep for sweep in SWEEPS if not sweep.unalign)


def every_op_runs(context, perf, launcher, name):
    """Each sweep with each built-in op (all_gather_perf: once, without one) over every type
    (-d all): one run each, as (sweep, op or None, run name, argv); only those whose name
    matches context.runs where it is set, which the scenario says first."""
    program = context.machine.nccl_tests_program(perf.program)
    runs = []
    for sweep in _sweeps(context, perf):
        for op in perf.ops or (None,):
            argv = launcher + [program] + sweep.arguments + ["-d", "all"] + perf.op_arguments(op) + _ONCE
            runs.append((sweep, op, "-".join(part for part in (name, sweep.name, op) if part), argv))
    if context.runs:
        chosen = [run for run in runs if fnmatch.fnmatchcase(run[2], context.runs)]
        context.say(f"  only the runs matching {context.runs}: {len(chosen)} of {len(runs)}")
        context.runs_chosen = True
        runs = chosen
    yield from runs


def _every_op_verdict(context, perf, run, sweep, op, ranks):
    return verdicts.nccl_tests_every_type(run.returncode, run.text, perf.row_op(op), sweep.sizes, ranks,
                                          perf.collective, kernels=context.kernels)


def _every_op_label(where, sweep, op):
    """"2 ranks, odd sizes, sum"; without an op, "2 ranks, odd sizes"."""
    return ", ".join(part for part in (where, f"{sweep.name} sizes", op) if part)


def rig_every_op(context, perf, ranks):
    """Every built-in op on every type, odd, small and unaligned sizes, `ranks` processes on
    GPU 0."""
    env = context.rig_env()
    with context.mps():
        for sweep, op, name, argv in every_op_runs(context, perf, _rig_launcher(context, ranks), f"nt-ops-n{ranks}"):
            context.restart_mps()
            run = context.run_one(name, argv, env, _EVERY_OP_RUN_LIMIT)
            yield _every_op_label(f"{ranks} ranks", sweep, op), _every_op_verdict(context, perf, run, sweep, op, ranks)


def gpus_every_op(context, perf):
    """Every built-in op on every type, odd, small and unaligned sizes, one MPI process on
    each of GPUs 0 and 1."""
    launcher = mpirun_command(2, _GPUS_PASSED_ON)
    for sweep, op, name, argv in every_op_runs(context, perf, launcher, "nt-ops-gpus2"):
        run = context.run_one(name, argv + ["-g", "1"], _gpus_env(context), _EVERY_OP_RUN_LIMIT)
        yield _every_op_label("2 GPUs", sweep, op), _every_op_verdict(context, perf, run, sweep, op, 2)


def _every_op_limit(perf):
    """Seconds a whole every-op scenario may take: 200 a run (3000 for 5 ops x 3 sweeps), and
    at least what one run a sweep may take (all_gather_perf's 3)."""
    return max(200 * len(SWEEPS) * len(perf.ops or (None,)), _EVERY_OP_RUN_LIMIT * len(SWEEPS))


def _register(perf):
    """perf's scenarios: on the rig, eagerly and in graphs; every type (and op) on the rig
    and on 2 GPUs; one process per GPU, one of every GPU, one thread per GPU."""
    program, every, ops = perf.program, perf.every, "each built-in op, " if perf.ops else ""
    rig_needs = ("gpu", "mps", "nccl", "mpirun", program)
    for ranks in (2, 4, 8):
        register(f"{perf.names}-{ranks}ranks", f"{program} -c 1, {ranks} MPI processes on one GPU", rig_needs, 1200,
                 functools.partial(rig, perf=perf, ranks=ranks))
    for ranks in (2, 3, 4):
        register(f"{perf.names}-{every}-{ranks}ranks",
                 f"{program} -c 1 -d all, {ops}odd, small and unaligned sizes, {ranks} MPI processes on one GPU",
                 rig_needs, _every_op_limit(perf), functools.partial(rig_every_op, perf=perf, ranks=ranks))
    register(f"multi-gpu-{perf.names}-mpi", f"{program} -c 1, one MPI process per GPU",
             ("2 gpus", "nccl", "mpirun", program), 1500, functools.partial(gpus_mpi, perf=perf))
    register(f"multi-gpu-{perf.names}-{every}",
             f"{program} -c 1 -d all, {ops}odd, small and unaligned sizes, one MPI process on each of 2 GPUs",
             ("2 gpus", "nccl", "mpirun", program), _every_op_limit(perf), functools.partial(gpus_every_op, perf=perf))
    register(f"multi-gpu-{perf.names}-one-process", f"{program} -c 1 -g N: one process drives every GPU",
             ("2 gpus", "nccl", program), 400,
             functools.partial(gpus_one_process, perf=perf, option="-g", name="one-process-g",
                               types=("bfloat16", "float")))
    register(f"multi-gpu-{perf.names}-threads", f"{program} -c 1 -t N: one thread per GPU",
             ("2 gpus", "nccl", program), 400,
             functools.partial(gpus_one_process, perf=perf, option="-t", name="threads-t", types=("float", "half")))


for _perf in PERFS:
    _register(_perf)
