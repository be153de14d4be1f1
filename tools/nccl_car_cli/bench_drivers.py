"""The programs bench runs, and what their output says: our car_nccl_bench (the default, source
tests/bench/nccl_bench.cc) or nccl-tests' all_reduce_perf. Each driver turns a job into a
command line and its output into Samples; NCCL's own tuning log gives the algorithm and
protocol NCCL chose per size.

Type names: bench keeps nccl-tests' (all_reduce_perf -d); car_nccl_bench --type gets the
library's (kernels/all_reduce.h); --dtypes accepts either and a few other spellings. The ops
are NCCL's built-in ones, under the one name every program uses.

car_nccl_bench prints '#' lines, then CSV rows, each figure the largest over ranks:
    mode,workload,bytes,us,checked,wrong,samples_us
mode is model-graph, model-eager, isolated-graph, isolated-eager, host, chain-graph,
chain-eager or probe (one call checked on the host, not timed); checked is the calls whose
output was checked (the last of every timed sample); samples_us the figure of each sample.
Its output from before the modes ("bytes,eager_us,graph_us,host_us", saved folders of
format 1 and 2) reads as chain rows: eager checked once per size, graph and host not at all."""

import os
import re
from dataclasses import dataclass

from . import paths
from .nccl_tests import parse_output

# nccl-tests' name, the library's name, other spellings; in NCCL's order.
_TYPES = (
    ("int8", "int8", ()),
    ("uint8", "uint8", ()),
    ("int32", "int32", ()),
    ("uint32", "uint32", ()),
    ("int64", "int64", ()),
    ("uint64", "uint64", ()),
    ("half", "fp16", ("float16",)),
    ("float", "fp32", ("float32",)),
    ("double", "fp64", ("float64",)),
    ("bfloat16", "bf16", ()),
    ("f8e4m3", "fp8e4m3", ()),
    ("f8e5m2", "fp8e5m2", ()),
)
DTYPES = tuple(name for name, _library, _others in _TYPES)
LIBRARY_NAMES = {name: library for name, library, _others in _TYPES}
# Every spelling --dtypes accepts -> nccl-tests' name.
SPELLINGS = {spelling: name for name, library, others in _TYPES for spelling in (name, library, *others)}
OPS = ("sum", "prod", "min", "max", "avg")
DEFAULT_OP = "sum"
# What car_nccl_bench --collective measures (all_reduce_perf: the first only), and NCCL's own
# name of each, as its tuning log spells it.
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter")
NCCL_NAMES = {"all-reduce": "AllReduce", "all-gather": "AllGather", "reduce-scatter": "ReduceScatter"}

# How a row's outputs were checked.
CHECKED_EVERY = "every"   # the last call of every timed sample, exactly
CHECKED_ONCE = "once"     # one call per size, not a timed one (nccl-tests -c 1, our old program's eager rows)
CHECKED_NONE = "no"

MODES = ("model", "isolated", "chain")     # what --modes takes
WORKLOADS = ("plain", "in-place", "two-streams", "after-large")
HOST_MODE = "host"                         # the time to issue one eager call (isolated calls)
PROBE_MODE = "probe"


def row_modes(modes):
    """The rows a run of `modes` prints, in table order."""
    rows = []
    for mode in modes:
        rows += [f"{mode}-graph", f"{mode}-eager"] + ([HOST_MODE] if mode == "isolated" else [])
    return rows


@dataclass(frozen=True)
class Sample:
    dtype: str
    op: str
    mode: str              # a row mode: model-graph, ..., host (probe rows are not samples)
    workload: str
    size: int
    config: str
    time_us: float | None  # None: not timed
    wrong: int | None      # None: not checked
    checked: str = CHECKED_NONE


@dataclass
class Output:
    """What one run printed: its samples, NCCL's choice per size (probe runs) and what went
    wrong."""
    samples: list
    choices: dict          # size -> "RING/LL", "symmetric AllReduce_AGxLL_R", ...
    problem: str | None


# NCCL's tuning log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING), rank 0, one line per call;
# the sizes are NCCL's own count of the call's bytes.
TUNING_LOG = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING"}


def nccl_choices(text, collective=COLLECTIVES[0]):
    """{size: what NCCL chose} for `collective`'s calls in its tuning log (a run of another
    collective also logs the program's own small all-reduces); several choices at one size
    are joined."""
    name = NCCL_NAMES[collective]
    tuning = re.compile(rf"NCCL INFO {name}: (\d+) Bytes -> Algo (\S+) proto (\S+)")
    symmetric = re.compile(rf"NCCL INFO {name} \[Symmetric\]: (\d+) Bytes -> Kernel (\S+)")
    seen = {}
    for line in text.splitlines():
        match = tuning.search(line)
        if match:
            choice = f"{match.group(2)}/{match.group(3)}"
        else:
            match = symmetric.search(line)
            if not match:
                continue
            choice = f"symmetric {match.group(2)}"
        seen.setdefault(int(match.group(1)), [])
        if choice not in seen[int(match.group(1))]:
            seen[int(match.group(1))].append(choice)
    return {size: "+".join(choices) for size, choices in seen.items()}


class CarNcclBench:
    name = "car_nccl_bench"
    runs_per_form = False   # one run measures every mode, workload and size

    def __init__(self, program, sizes, modes, workloads, ranks, one_gpu=False, extra_args=(),
                 collective="all-reduce"):
        self.program = program
        self.placement = ["--ranks", str(ranks)] + (["--one-gpu"] if one_gpu else [])
        self.sizes, self.modes, self.workloads = list(sizes), list(modes), list(workloads)
        self.collective = collective
        self.extra_args = list(extra_args)

    @property
    def row_modes(self):
        return row_modes(self.modes)

    def command(self, job):
        """The program's arguments for a job (bench_runs.Job)."""
        what = ["--probe"] if job.probe else ["--modes", ",".join(self.modes),
                                              "--workloads", ",".join(self.workloads)]
        return ([self.program, *self.placement, "--collective", self.collective,
                 "--type", LIBRARY_NAMES[job.dtype], "--op", job.op,
                 "--sizes", ",".join(map(str, self.sizes)), *what]
                + (["--symmetric"] if job.config.symmetric else []) + self.extra_args)

    @staticmethod
    def launched(command, changes):
        return command, changes

    def parse(self, job, stdout, stderr):
        samples, problems, wrong_at = [], [], []
        legacy = "bytes,eager_us,graph_us,host_us" in stdout
        for line in stdout.splitlines():
            read = _legacy_row(job, line) if legacy else _row(job, line)
            for sample in read:
                samples.append(sample)
                if sample.wrong:
                    wrong_at.append(f"{sample.size} bytes {sample.mode} {sample.workload} ({sample.wrong} element(s))")
        if wrong_at:
            problems.append("wrong results at " + ", ".join(wrong_at))
        if not samples:
            problems.append("printed no result rows")
        choices = nccl_choices(stdout + "\n" + stderr, self.collective) if job.probe else {}
        return Output([s for s in samples if s.mode != PROBE_MODE], choices, "; ".join(problems) or None)


def _row(job, line):
    fields = line.strip().split(",")
    if len(fields) != 7 or not fields[2].isdigit() or fields[1] not in WORKLOADS:
        return []   # comments, the CSV header, NCCL's own log lines
    mode, workload, size, time, checked, wrong, _samples = fields
    try:
        time_us = float(time) if time else None
        checked_calls, wrong_count = int(checked), int(float(wrong))
    except ValueError:
        return []
    check = CHECKED_EVERY if checked_calls > 0 else CHECKED_NONE
    if mode == PROBE_MODE:
        check = CHECKED_ONCE
    return [Sample(job.dtype, job.op, mode, workload, int(size), job.config.name, time_us,
                   wrong_count if check != CHECKED_NONE else None, check)]


_LEGACY_WRONG = re.compile(r"#\s*wrong:\s*(\d+) bytes, (\d+) element")


def _legacy_row(job, line):
    """car_nccl_bench before the modes: the size was checked once before it was timed (the
    eager row says so), graph and host rows were never checked."""
    line = line.strip()
    wrong = _LEGACY_WRONG.match(line)
    if wrong:
        return [Sample(job.dtype, job.op, "chain-eager", "plain", int(wrong.group(1)), job.config.name, None,
                       int(wrong.group(2)), CHECKED_ONCE)]
    fields = line.split(",")
    if len(fields) != 4 or not fields[0].isdigit():
        return []
    try:
        eager, graph, host = map(float, fields[1:])
    except ValueError:
        return []
    size, config = int(fields[0]), job.config.name
    return [Sample(job.dtype, job.op, "chain-eager", "plain", size, config, eager, 0, CHECKED_ONCE),
            Sample(job.dtype, job.op, "chain-graph", "plain", size, config, graph, None, CHECKED_NONE),
            Sample(job.dtype, job.op, HOST_MODE, "plain", size, config, host, None, CHECKED_NONE)]


def default_program(library):
    """The program built or installed with the library: <build>/tests/car_nccl_bench for
    <build>/shim/libnccl-car.so, P/bin/car_nccl_bench for P/lib/libnccl-car.so."""
    return paths.companion(library, "bench")


class AllReducePerf:
    """nccl-tests' all_reduce_perf: back-to-back calls (the chain mode), one run per
    configuration, dtype, op and form (-G N or not); -c 1 so that nccl-tests checks one call
    per size after the timed ones; -R 2 for the symmetric configurations. all_reduce_perf
    measures float instead of a type it does not know (one built without fp8, say), sum
    instead of an op: rows of another type or op fail the run."""
    name = "all_reduce_perf"
    runs_per_form = True
    row_modes = ["chain-graph", "chain-eager"]

    def __init__(self, perf, min_bytes, max_bytes, gpus, launcher, graph_iters, in_place, extra_args,
                 launcher_preload):
        self.program = perf
        self.launcher = launcher or []
        self.arguments = [perf, "-b", str(min_bytes), "-e", str(max_bytes), "-f", "2",
                          "-g", str(1 if self.launcher else gpus), "-c", "1"]
        self.graph_iters = graph_iters
        self.in_place = in_place
        self.extra_args = list(extra_args)
        self.launcher_preload = launcher_preload   # LD_PRELOAD of the launcher itself
        self.workloads = ["in-place" if in_place else "plain"]

    def command(self, job):
        graph = str(self.graph_iters) if job.mode == "chain-graph" else "0"
        registration = ["-R", "2"] if job.config.symmetric else []
        return self.arguments + ["-d", job.dtype, "-o", job.op, "-G", graph] + registration + self.extra_args

    def launched(self, command, changes):
        """(argv, environment changes) with the launcher: the ranks get the variables through
        `env`, which also reaches ranks on other hosts; the launcher itself is never preloaded."""
        if not self.launcher:
            return command, changes
        removals = [word for name, value in changes.items() if value is None for word in ("-u", name)]
        assignments = [f"{name}={value}" for name, value in changes.items() if value is not None]
        return (self.launcher + ["env"] + removals + assignments + command,
                dict(changes, LD_PRELOAD=self.launcher_preload or None))

    def parse(self, job, stdout, stderr):
        output = parse_output(stdout)
        others = sorted({f"{row.dtype} {row.redop}" for row in output.rows} - {f"{job.dtype} {job.op}"})
        if others:
            return Output([], {}, f"measured {', '.join(others)} instead of {job.dtype} {job.op} (all_reduce_perf "
                                  "falls back to float for a type it does not know, to sum for an op)")
        samples = []
        for row in output.rows:
            timing = row.timing(self.in_place)
            samples.append(Sample(job.dtype, job.op, job.mode, self.workloads[0], row.size, job.config.name,
                                  timing.time_us, timing.wrong, CHECKED_NONE if timing.wrong is None else CHECKED_ONCE))
        problems = []
        if any(sample.wrong for sample in samples):
            problems.append("wrong results at " + ", ".join(f"{s.size} bytes ({s.wrong} element(s))"
                                                            for s in samples if s.wrong))
        if not output.rows:
            problems.append("printed no result table")
        if output.bounds_ok is False:
            problems.append(f"{output.out_of_bounds} out-of-bounds values")
        return Output(samples, {}, "; ".join(problems) or None)
