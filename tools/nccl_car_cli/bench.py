"""nccl-car bench: all_reduce_perf from nccl-tests, NCCL alone and with nccl-car, run in
alternation so that drift (clocks, other jobs) hits both sides alike."""

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from . import gpu_probe, options, paths, settings
from .csv_table import write_csv
from .errors import EXIT_FAILED, EXIT_OK, MissingPrerequisite, UsageError
from .logparse import LogTally
from .nccl_tests import parse_output
from .results import Samples, any_wrong, format_table
from .svg_chart import write_svg
from .units import format_size

DESCRIPTION = """\
Runs nccl-tests' all_reduce_perf without and with libnccl-car.so, alternating (without,
with, without, with, ...) --repeats times for every dtype and mode, with -c 1 so that
nccl-tests checks every result. Prints the median time per size for both, the speedup
(NCCL time / nccl-car time) and the #wrong counts, and writes a CSV file and an SVG chart.

exit codes: 0 all runs passed with no wrong result, 1 a run failed or a result was wrong,
2 usage error, 3 all_reduce_perf, the library or a GPU is missing."""

EPILOG = """\
examples:
  nccl-car bench --all-reduce-perf ~/nccl-tests/build/all_reduce_perf
  nccl-car bench --dtypes bfloat16 --modes graph --max-bytes 8M --repeats 5
  nccl-car bench --launcher "mpirun -np 4 --allow-run-as-root" --extra-args "-n 50"

NCCL_CAR_* variables set when calling bench (NCCL_CAR_ALGO=2stage, ...) apply to the
runs with nccl-car."""

NCCL_TESTS_HELP = """\
all_reduce_perf not found{where}. Build nccl-tests (it is not part of this repository):
  git clone https://github.com/NVIDIA/nccl-tests
  make -C nccl-tests MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=<folder with include/nccl.h and lib/>
then put nccl-tests/build on PATH or pass --all-reduce-perf nccl-tests/build/all_reduce_perf
(for --launcher mpirun, build with MPI=1 MPI_HOME=<your MPI>)."""

# nccl-tests' -d names, and the other spellings accepted for them.
DTYPE_NAMES = {"half": "half", "fp16": "half", "float16": "half",
               "bfloat16": "bfloat16", "bf16": "bfloat16",
               "float": "float", "fp32": "float", "float32": "float"}
MODES = ("eager", "graph")
OUTPUT_TAIL_LINES = 15


def _list_of(allowed, what):
    def parse(text):
        chosen = []
        for word in (w.strip().lower() for w in text.split(",")):
            if word not in allowed:
                raise argparse.ArgumentTypeError(
                    f"unknown {what} '{word}': expected some of {', '.join(sorted(set(allowed)))}")
            value = allowed[word] if isinstance(allowed, dict) else word
            if value not in chosen:
                chosen.append(value)
        return chosen
    return parse


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--all-reduce-perf", metavar="PATH",
                        help="nccl-tests' all_reduce_perf (default: found on PATH)")
    parser.add_argument("--lib", metavar="PATH",
                        help="libnccl-car.so (default: $NCCL_CAR_LIB, else "
                             "build/shim/libnccl-car.so in this repository)")
    parser.add_argument("--dtypes", type=_list_of(DTYPE_NAMES, "dtype"),
                        default=["half", "bfloat16", "float"], metavar="LIST",
                        help="comma-separated: half, bfloat16, float (default: all three)")
    parser.add_argument("--modes", type=_list_of(MODES, "mode"), default=list(MODES),
                        metavar="LIST", help="comma-separated: eager, graph (default: both)")
    parser.add_argument("--min-bytes", type=options.positive_size, default=1 << 10, metavar="SIZE",
                        help="smallest size, e.g. 1K (default 1K); sizes double up to --max-bytes")
    parser.add_argument("--max-bytes", type=options.positive_size, default=16 << 20, metavar="SIZE",
                        help="largest size, e.g. 16M (default 16M)")
    parser.add_argument("--repeats", type=options.positive_int, default=3, metavar="N",
                        help="runs of each side per dtype and mode; the median is reported (default 3)")
    parser.add_argument("--graph-iters", type=options.positive_int, default=10, metavar="N",
                        help="graph launches per measurement in graph mode: nccl-tests -G N (default 10)")
    launch = parser.add_mutually_exclusive_group()
    launch.add_argument("--gpus", type=options.positive_int, metavar="N",
                        help="GPUs in one process: nccl-tests -g N (default: every visible GPU)")
    launch.add_argument("--launcher", type=options.command_words, metavar="COMMAND",
                        help='prefix that starts one rank per GPU, e.g. "mpirun -np 4 '
                             '--allow-run-as-root"; each rank then uses -g 1')
    parser.add_argument("--extra-args", type=options.words, default=[], metavar="ARGS",
                        help='more all_reduce_perf options, e.g. "-n 50 -w 10"; they come last, '
                             "so they override the tool's own")
    parser.add_argument("--in-place", action="store_true",
                        help="report nccl-tests' in-place columns (default: out-of-place)")
    parser.add_argument("--csv", default="nccl-car-bench.csv", metavar="PATH",
                        help="CSV output (default nccl-car-bench.csv)")
    parser.add_argument("--svg", default="nccl-car-bench.svg", metavar="PATH",
                        help="SVG chart (default nccl-car-bench.svg)")
    parser.add_argument("--timeout", type=options.positive_int, default=600, metavar="SECONDS",
                        help="a run taking longer is killed and counted as failed (default 600)")


@dataclass
class Job:
    dtype: str
    mode: str
    repeat: int
    with_car: bool

    def describe(self, repeats):
        side = "with nccl-car" if self.with_car else "NCCL only"
        return f"{self.dtype} {self.mode} {side}, repeat {self.repeat + 1}/{repeats}"


def plan_jobs(dtypes, modes, repeats):
    """Without and with alternate inside each (dtype, mode), repeat after repeat."""
    return [Job(dtype, mode, repeat, with_car)
            for dtype in dtypes for mode in modes
            for repeat in range(repeats) for with_car in (False, True)]


def _find_perf(option):
    if option:
        if not (os.path.isfile(option) and os.access(option, os.X_OK)):
            raise MissingPrerequisite(NCCL_TESTS_HELP.format(where=f" at {option}"))
        return os.path.abspath(option)
    found = shutil.which("all_reduce_perf")
    if found is None:
        raise MissingPrerequisite(NCCL_TESTS_HELP.format(where=" on PATH"))
    return found


class _Launch:
    """Turns a Job into the command line and environment of one all_reduce_perf run."""

    def __init__(self, args, perf, library, base_env):
        self.launcher = args.launcher or []
        gpus = 1 if self.launcher else args.gpus
        self.perf_args = [perf, "-b", str(args.min_bytes), "-e", str(args.max_bytes), "-f", "2",
                          "-g", str(gpus), "-o", "sum", "-c", "1"]
        self.graph_iters = args.graph_iters
        self.extra = args.extra_args
        self.env = dict(base_env)
        self.baseline_preload = paths.preload_without(base_env.get("LD_PRELOAD"), library)
        self.car_preload = paths.preload_with(base_env.get("LD_PRELOAD"), library)
        self.car_debug = settings.at_least_info(base_env.get("NCCL_CAR_DEBUG"))

    def command(self, job):
        graph = str(self.graph_iters) if job.mode == "graph" else "0"
        perf = self.perf_args + ["-d", job.dtype, "-G", graph] + self.extra
        variables = {"LD_PRELOAD": self.car_preload if job.with_car else self.baseline_preload}
        if job.with_car:
            variables["NCCL_CAR_DEBUG"] = self.car_debug
        if not self.launcher:
            return perf, self._environment(variables)
        # The ranks get the variables through `env`, which also reaches ranks on other hosts;
        # the launcher itself is never preloaded.
        assignments = [f"{name}={value}" for name, value in variables.items()]
        return self.launcher + ["env"] + assignments + perf, \
            self._environment({"LD_PRELOAD": self.baseline_preload})

    def _environment(self, variables):
        env = dict(self.env)
        env.update(variables)
        if not env["LD_PRELOAD"]:
            del env["LD_PRELOAD"]
        return env


def _run_once(command, env, timeout):
    """(stdout, stderr, failure or None). The run gets its own process group, so that a
    timeout or Ctrl-C ends the launcher and every rank it started."""
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, errors="replace", start_new_session=True)
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        stdout, stderr = child.communicate()
        return stdout, stderr, f"timed out after {timeout} s"
    except BaseException:  # Ctrl-C: leave no rank spinning on a GPU
        _kill_group(child)
        child.wait()
        raise
    if child.returncode < 0:
        return stdout, stderr, f"killed by signal {-child.returncode}"
    if child.returncode != 0:
        return stdout, stderr, f"exited with {child.returncode}"
    return stdout, stderr, None


def _kill_group(child):
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the whole group had already exited


def _tail(label, text):
    lines = text.rstrip("\n").splitlines()[-OUTPUT_TAIL_LINES:]
    return [f"    {label}: {line}" for line in lines]


def _prerequisites(args):
    """(all_reduce_perf, library); fills in args.gpus. Usage errors first, then what is
    missing, in the order a user would fix it."""
    if args.min_bytes > args.max_bytes:
        raise UsageError(f"--min-bytes ({format_size(args.min_bytes)}) is above --max-bytes "
                         f"({format_size(args.max_bytes)})")
    perf = _find_perf(args.all_reduce_perf)
    library, source = paths.library_location(args.lib, os.environ)
    if not os.path.isfile(library):
        raise MissingPrerequisite(paths.library_missing_message(library, source))
    if args.launcher:
        if shutil.which(args.launcher[0]) is None:
            raise MissingPrerequisite(f"launcher not found: {args.launcher[0]}")
    elif args.gpus is None:
        args.gpus = gpu_probe.visible_gpu_count()
        if args.gpus == 0:
            raise MissingPrerequisite("no GPU visible (see nccl-car doctor); pass --gpus N "
                                      "or --launcher to run anyway")
    return perf, library


def execute(args):
    perf, library = _prerequisites(args)
    launch = _Launch(args, perf, library, os.environ)
    jobs = plan_jobs(args.dtypes, args.modes, args.repeats)
    samples = Samples()
    car_log, baseline_log = LogTally(), LogTally()
    failures = []
    for number, job in enumerate(jobs, start=1):
        print(f"[{number}/{len(jobs)}] {job.describe(args.repeats)} ...", end=" ",
              file=sys.stderr, flush=True)
        command, env = launch.command(job)
        started = time.monotonic()
        stdout, stderr, failure = _run_once(command, env, args.timeout)
        output = parse_output(stdout)
        if failure is None and not output.rows:
            failure = "printed no result table"
        if failure is None and output.bounds_ok is False:
            failure = f"{output.out_of_bounds} out-of-bounds values"
        for line in stderr.splitlines():
            (car_log if job.with_car else baseline_log).feed(line)
        if failure:
            print(f"FAILED: {failure}", file=sys.stderr)
            print(f"    command: {shlex.join(command)}", file=sys.stderr)
            print("\n".join(_tail("stdout", stdout) + _tail("stderr", stderr)), file=sys.stderr)
            failures.append(f"{job.describe(args.repeats)}: {failure}")
        else:
            print(f"{time.monotonic() - started:.1f} s", file=sys.stderr)
        samples.add(job.dtype, job.mode, job.with_car, output, args.in_place)

    comparisons = samples.compare(args.dtypes, args.modes)
    place = "in-place" if args.in_place else "out-of-place"
    print(f"all-reduce, {place}, median of {args.repeats} run(s) per side:")
    print(format_table(comparisons))
    write_csv(args.csv, comparisons, place)
    write_svg(args.svg, comparisons,
              f"all-reduce: NCCL vs nccl-car ({place}, median of {args.repeats} run(s) per side)")
    print(f"wrote {args.csv} and {args.svg}")

    print("library lines in the runs with nccl-car:")
    for line in car_log.summary_lines():
        print("  " + line)
    if car_log.library_lines == 0:
        print("warning: the library logged nothing in the runs with nccl-car: if it was not "
              "loaded, the nccl-car column measured NCCL alone")
    if baseline_log.library_lines:
        print("warning: the NCCL-only runs printed NCCL-CAR lines: the library was loaded "
              "there too (a launcher -x LD_PRELOAD, /etc/ld.so.preload?), so they are not a baseline")
    status = EXIT_OK
    if failures:
        print(f"{len(failures)} run(s) failed:")
        for failure in failures:
            print(f"  {failure}")
        status = EXIT_FAILED
    if any_wrong(comparisons):
        print("wrong results: see the #wrong columns")
        status = EXIT_FAILED
    return status
