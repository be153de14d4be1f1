"""nccl-car bench: nccl-car against NCCL's best configuration, every configuration once per
repeat in a fixed order, so that drift (clocks, other jobs) hits all of them alike. The
driver is our own program (build/tests/car_nccl_bench) or nccl-tests' all_reduce_perf."""

import argparse
import datetime
import os
import shlex
import shutil
import socket
import sys
import time

from . import bench_configs, driver_all_reduce_perf, driver_car_nccl_bench, gpu_probe, options, paths
from .bench_folder import SavedRuns, load
from .bench_plan import plan_jobs
from .bench_process import run_once, tail
from .bench_report import format_tables, verdict_lines
from .bench_runs import RunRecord, analyse, failure_of
from .csv_table import write_csv
from .driver_all_reduce_perf import AllReducePerf
from .driver_car_nccl_bench import CarNcclBench
from .errors import EXIT_FAILED, EXIT_OK, MissingPrerequisite, UsageError
from .results import HOST_MODE, any_wrong, rows_of
from .svg_chart import write_svg
from .units import format_size

DESCRIPTION = """\
Runs NCCL in four configurations (nccl: alone; nccl-R2: buffers registered as symmetric
windows; nccl-gm0: NCCL_GRAPH_MIXING_SUPPORT=0; nccl-R2-gm0: both) and NCCL with
libnccl-car.so (car), each once per repeat in that order, and prints per size the median
time of NCCL alone, of NCCL's best configuration, of nccl-car, and nccl-car / best (below
1.00: nccl-car is faster); then the sizes where nccl-car is slower than NCCL's best.

The driver is our own program, car_nccl_bench (built beside the library by
scripts/build.sh; it also measures the host time per call), or nccl-tests' all_reduce_perf
with --all-reduce-perf. Every size is checked for exact results.

exit codes: 0 all runs passed with no wrong result, 1 a run failed or a result was wrong,
2 usage error, 3 the driver, the library or GPUs are missing."""

EPILOG = """\
examples:
  nccl-car bench --dtypes bf16 --max-bytes 8M --repeats 2
  nccl-car bench --configs car-1shot,car-2shot --save /tmp/runs
  nccl-car bench --from /tmp/runs
  nccl-car bench --all-reduce-perf ~/nccl-tests/build/all_reduce_perf --modes graph
  nccl-car bench --all-reduce-perf all_reduce_perf --launcher "mpirun -np 4" --extra-args "-n 50"

NCCL_CAR_* variables set when calling bench (NCCL_CAR_MAX_BYTES=..., ...) apply to the
runs with nccl-car."""

MISSING_DRIVER = """\
no benchmark program: no car_nccl_bench at {program} (scripts/build.sh builds it beside the
library where NCCL's library is found) and no all_reduce_perf on PATH. Pass
--car-nccl-bench PATH, or build nccl-tests (it is not part of this repository):
  git clone https://github.com/NVIDIA/nccl-tests
  make -C nccl-tests MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=<folder with include/nccl.h and lib/>
and pass --all-reduce-perf nccl-tests/build/all_reduce_perf (for --launcher mpirun, build with
MPI=1 MPI_HOME=<your MPI>)."""

# nccl-tests' -d names, and the other spellings accepted for them.
DTYPE_NAMES = {"half": "half", "fp16": "half", "float16": "half",
               "bfloat16": "bfloat16", "bf16": "bfloat16",
               "float": "float", "fp32": "float", "float32": "float"}
MODES = ("eager", "graph")
PARSERS = {driver_car_nccl_bench.NAME: driver_car_nccl_bench.parse,
           driver_all_reduce_perf.NAME: driver_all_reduce_perf.parse}
# Options that shape the runs, with their defaults: --from takes them from the folder instead.
RUN_DEFAULTS = {"all_reduce_perf": None, "car_nccl_bench": None, "lib": None,
                "configs": [], "dtypes": ["half", "bfloat16", "float"], "modes": list(MODES),
                "min_bytes": 1 << 10, "max_bytes": 16 << 20, "repeats": 3, "graph_iters": None,
                "gpus": None, "launcher": None, "extra_args": [], "in_place": False,
                "timeout": 600, "save": None}
# Only nccl-tests has these: given without a driver option, they choose all_reduce_perf.
NCCL_TESTS_ONLY = ("launcher", "in_place", "graph_iters")


def _list_of(allowed, what):
    def parse(text):
        chosen = []
        for word in (w.strip() for w in text.split(",")):
            key = word if word in allowed else word.lower()
            if key not in allowed:
                raise argparse.ArgumentTypeError(
                    f"unknown {what} '{word}': expected some of {', '.join(sorted(set(allowed)))}")
            value = allowed[key] if isinstance(allowed, dict) else key
            if value not in chosen:
                chosen.append(value)
        return chosen
    return parse


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.set_defaults(**RUN_DEFAULTS)
    driver = parser.add_mutually_exclusive_group()
    driver.add_argument("--car-nccl-bench", metavar="PATH",
                        help="our benchmark program (default: tests/car_nccl_bench of the build the "
                             "library is in, when it exists)")
    driver.add_argument("--all-reduce-perf", metavar="PATH",
                        help="use nccl-tests' all_reduce_perf instead (found on PATH when our "
                             "program is missing)")
    parser.add_argument("--lib", metavar="PATH",
                        help="libnccl-car.so (default: $NCCL_CAR_LIB, else "
                             "build/shim/libnccl-car.so in this repository)")
    parser.add_argument("--configs", type=_list_of(bench_configs.NAMES, "configuration"), metavar="LIST",
                        help="variants of nccl-car to run as well, comma-separated: "
                             f"{', '.join(bench_configs.VARIANT_NAMES)}")
    parser.add_argument("--dtypes", type=_list_of(DTYPE_NAMES, "dtype"), metavar="LIST",
                        help="comma-separated: half, bfloat16, float (default: all three)")
    parser.add_argument("--modes", type=_list_of(MODES, "mode"), metavar="LIST",
                        help="comma-separated: eager, graph (default: both)")
    parser.add_argument("--min-bytes", type=options.positive_size, metavar="SIZE",
                        help="smallest size, e.g. 1K (default 1K); sizes double up to --max-bytes")
    parser.add_argument("--max-bytes", type=options.positive_size, metavar="SIZE",
                        help="largest size, e.g. 8M (default 16M)")
    parser.add_argument("--repeats", type=options.positive_int, metavar="N",
                        help="runs of each configuration per dtype (and mode); the median is reported "
                             "(default 3)")
    launch = parser.add_mutually_exclusive_group()
    launch.add_argument("--gpus", type=options.positive_int, metavar="N",
                        help="GPUs to use (default: every visible GPU); all_reduce_perf -g N")
    launch.add_argument("--launcher", type=options.command_words, metavar="COMMAND",
                        help='all_reduce_perf only: prefix that starts one rank per GPU, e.g. '
                             '"mpirun -np 4 --allow-run-as-root"; each rank then uses -g 1')
    parser.add_argument("--graph-iters", type=options.positive_int, metavar="N",
                        help="all_reduce_perf only: graph launches per measurement, -G N (default 10)")
    parser.add_argument("--in-place", action="store_true",
                        help="all_reduce_perf only: report the in-place columns")
    parser.add_argument("--extra-args", type=options.words, metavar="ARGS",
                        help='more options for the driver, last, so they win: e.g. --extra-args="--calls 200" '
                             'for car_nccl_bench, "-n 50 -w 10" for all_reduce_perf')
    parser.add_argument("--timeout", type=options.positive_int, metavar="SECONDS",
                        help="a run taking longer is killed and counted as failed (default 600)")
    folder = parser.add_mutually_exclusive_group()
    folder.add_argument("--save", metavar="DIR",
                        help="keep every run's stdout and stderr in DIR (<config>.<repeat>.out/.err) "
                             "with DIR/bench.json, for --from")
    folder.add_argument("--from", dest="from_folder", metavar="DIR",
                        help="print the table from a folder written by --save; runs nothing")
    parser.add_argument("--csv", default="nccl-car-bench.csv", metavar="PATH",
                        help="CSV output (default nccl-car-bench.csv)")
    parser.add_argument("--svg", default="nccl-car-bench.svg", metavar="PATH",
                        help="SVG chart (default nccl-car-bench.svg)")


def _executable(path, option):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise MissingPrerequisite(f"{option}: no executable at {path}")
    return os.path.abspath(path)


def _choose_driver(args, library):
    """(driver name, program path): the option given; else our program when it exists and
    no all_reduce_perf-only option was given; else all_reduce_perf on PATH."""
    if args.all_reduce_perf:
        return driver_all_reduce_perf.NAME, _executable(args.all_reduce_perf, "--all-reduce-perf")
    if args.car_nccl_bench:
        return driver_car_nccl_bench.NAME, _executable(args.car_nccl_bench, "--car-nccl-bench")
    program = driver_car_nccl_bench.default_program(library)
    if os.path.isfile(program) and os.access(program, os.X_OK) and not _nccl_tests_options(args):
        return driver_car_nccl_bench.NAME, program
    found = shutil.which("all_reduce_perf")
    if found is None:
        raise MissingPrerequisite(MISSING_DRIVER.format(program=program))
    return driver_all_reduce_perf.NAME, found


def _nccl_tests_options(args):
    return [name for name in NCCL_TESTS_ONLY if getattr(args, name) != RUN_DEFAULTS[name]]


def _option(name):
    return "--" + name.replace("_", "-")


def _check_usage(args):
    if args.from_folder:
        given = [_option(name) for name, default in RUN_DEFAULTS.items() if getattr(args, name) != default]
        if given:
            raise UsageError(f"--from takes the runs' options from the folder: drop {', '.join(given)}")
        return
    if args.min_bytes > args.max_bytes:
        raise UsageError(f"--min-bytes ({format_size(args.min_bytes)}) is above --max-bytes "
                         f"({format_size(args.max_bytes)})")
    if args.car_nccl_bench and _nccl_tests_options(args):
        raise UsageError(f"{', '.join(map(_option, _nccl_tests_options(args)))}: all_reduce_perf "
                         "only, not car_nccl_bench")


def _prerequisites(args):
    """(driver, library); fills in args.gpus. What is missing, in the order a user would
    fix it."""
    library, source = paths.library_location(args.lib, os.environ)
    driver_name, program = _choose_driver(args, library)
    if not os.path.isfile(library):
        raise MissingPrerequisite(paths.library_missing_message(library, source))
    if driver_name == driver_car_nccl_bench.NAME:
        if args.gpus is None:
            args.gpus = gpu_probe.visible_gpu_count()
            if args.gpus < 2:
                raise MissingPrerequisite(f"car_nccl_bench needs 2 or more GPUs; {args.gpus} visible "
                                          "(see nccl-car doctor)")
        elif args.gpus < 2:
            raise UsageError(f"car_nccl_bench needs 2 or more GPUs: --gpus {args.gpus}")
        driver = CarNcclBench(program, args.gpus, args.min_bytes, args.max_bytes, args.extra_args)
        return driver, library
    if args.launcher:
        if shutil.which(args.launcher[0]) is None:
            raise MissingPrerequisite(f"launcher not found: {args.launcher[0]}")
    elif args.gpus is None:
        args.gpus = gpu_probe.visible_gpu_count()
        if args.gpus == 0:
            raise MissingPrerequisite("no GPU visible (see nccl-car doctor); pass --gpus N "
                                      "or --launcher to run anyway")
    launcher_preload = paths.preload_without(os.environ.get("LD_PRELOAD"), library)
    driver = AllReducePerf(program, args.gpus, args.launcher, args.min_bytes, args.max_bytes,
                           args.graph_iters or 10, args.extra_args, launcher_preload)
    return driver, library


def _header(args, driver, library, configs):
    """What --save writes at the top of bench.json and the report reads back."""
    modes = args.modes if driver.modes_per_run else args.modes + [HOST_MODE]
    return {"driver": driver.name, "program": driver.arguments[0], "library": library,
            "configs": [config.name for config in configs], "dtypes": args.dtypes, "modes": modes,
            "repeats": args.repeats, "place": "in-place" if args.in_place else "out-of-place",
            "gpus": args.gpus, "launcher": args.launcher, "host": socket.gethostname(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def _run_all(args, driver, library, header):
    configs = [bench_configs.by_name(name) for name in header["configs"]]
    jobs = plan_jobs(configs, args.dtypes, args.modes if driver.modes_per_run else None, args.repeats)
    saved = SavedRuns(args.save, header) if args.save else None
    records = []
    for number, job in enumerate(jobs, start=1):
        print(f"[{number}/{len(jobs)}] {job.describe(args.repeats)} ...", end=" ", file=sys.stderr, flush=True)
        changes = bench_configs.variables(job.config, os.environ, library)
        command, local_changes = driver.command(job, changes)
        started = time.monotonic()
        stdout, stderr, failure = run_once(command, bench_configs.environment(os.environ, local_changes),
                                           args.timeout)
        record = RunRecord(job, command, changes, stdout, stderr, failure, time.monotonic() - started)
        _samples, failure = failure_of(record, PARSERS[driver.name], args.in_place)
        if failure:
            print(f"FAILED: {failure}", file=sys.stderr)
            print(f"    command: {shlex.join(command)}", file=sys.stderr)
            print("\n".join(tail("stdout", stdout) + tail("stderr", stderr)), file=sys.stderr)
        else:
            print(f"{record.seconds:.1f} s", file=sys.stderr)
        records.append(record)
        if saved:
            saved.add(record)
    return records


def _print_logs(analysis, configs):
    for config in configs:
        tally = analysis.logs[config.name]
        if not config.with_car:
            continue
        print(f"library lines in the {config.name} runs:")
        for line in tally.summary_lines():
            print("  " + line)
        if tally.library_lines == 0:
            print(f"warning: the library logged nothing in the {config.name} runs: if it was not "
                  "loaded, they measured NCCL alone")
    loaded = analysis.nccl_runs_with_library()
    if loaded:
        print(f"warning: the NCCL-only runs ({', '.join(loaded)}) printed NCCL-CAR lines: the library "
              "was loaded there too (a launcher -x LD_PRELOAD, /etc/ld.so.preload?), so they are not a baseline")


def _report(header, records, csv_path, svg_path):
    """Prints the table and the rest from the runs' records; returns the exit status."""
    configs = [bench_configs.by_name(name) for name in header["configs"]]
    analysis = analyse(records, PARSERS[header["driver"]], header["repeats"], header["place"] == "in-place")
    rows = rows_of(analysis.samples, configs, header["dtypes"], header["modes"])
    where = f"{header['gpus']} GPU(s)" if header.get("gpus") else shlex.join(header.get("launcher") or [])
    title = (f"all-reduce, {header['place']}, {header['driver']} on {where}, median of "
             f"{header['repeats']} run(s) per configuration")
    print(f"{title} ({header.get('host', '?')}, {header.get('started', '?')})")
    print(format_tables(rows, configs))
    print()
    for line in verdict_lines(rows):
        print(line)
    write_csv(csv_path, rows, configs, header["place"])
    write_svg(svg_path, rows, f"all-reduce: nccl-car against NCCL's best ({title})")
    print(f"wrote {csv_path} and {svg_path}")
    _print_logs(analysis, configs)
    status = EXIT_OK
    if analysis.failures:
        print(f"{len(analysis.failures)} run(s) failed:")
        for failure in analysis.failures:
            print(f"  {failure}")
        status = EXIT_FAILED
    if any_wrong(rows):
        print("wrong results: see the #wrong columns")
        status = EXIT_FAILED
    return status


def _load(folder):
    header, records = load(folder)
    if header.get("driver") not in PARSERS:
        raise UsageError(f"{folder}: unknown driver {header.get('driver')!r} in bench.json")
    print(f"runs read from {folder}", file=sys.stderr)
    return header, records


def execute(args):
    _check_usage(args)
    if args.from_folder:
        header, records = _load(args.from_folder)
        return _report(header, records, args.csv, args.svg)
    driver, library = _prerequisites(args)
    header = _header(args, driver, library, bench_configs.chosen(args.configs))
    records = _run_all(args, driver, library, header)
    return _report(header, records, args.csv, args.svg)
