"""nccl-car bench: nccl-car against NCCL's best configuration, measured as a model sees it.
This module is the command line and the flow: options, what must be there first, the runs,
the report. The pieces: bench_drivers (the programs and their output), bench_runs
(configurations, the plan, running, saved folders), bench_results (rows), bench_report
(table, CSV, chart)."""

import argparse
import datetime
import os
import random
import shlex
import shutil
import socket
import sys

from . import gpu_probe, host_probe, library_query, options, paths
from .bench_drivers import (COLLECTIVES, DEFAULT_OP, DTYPES, LIBRARY_NAMES, MODES, OPS, SPELLINGS, WORKLOADS,
                            AllReducePerf, CarNcclBench, default_program)
from .bench_report import NO_MATPLOTLIB, format_tables, verdict_lines, write_chart, write_csv
from .bench_results import any_wrong, rows_of
from .bench_runs import VARIANTS_FROM, SavedRuns, analyse, chosen, load, plan, run_all, tail, with_nccl
from .errors import EXIT_FAILED, EXIT_OK, MissingPrerequisite, UsageError
from .tune_table import NVLINK, PCIE, winner_at
from .units import format_size, short_size

DESCRIPTION = """\
Runs NCCL in four configurations (nccl: alone; nccl-R2: buffers registered as symmetric
windows; nccl-gm0: NCCL_GRAPH_MIXING_SUPPORT=0; nccl-R2-gm0: both) and NCCL with
libnccl-car.so, with programmatic dependent launch (car) and without (car-pdl0), --repeats
times each in an order shuffled anew for every repeat, and prints per size the median and
spread of every configuration, NCCL's best (the fastest NCCL configuration) and what NCCL
chose there (its tuning log), and ours against it; then where nccl-car is slower.

The modes (our program, car_nccl_bench): model (per layer a cuBLAS GEMM, the all-reduce, an
elementwise kernel, as a CUDA graph and eager: per all-reduce, the step minus the same step
without them, over the layers; the headline), isolated (a plain kernel writes each call's
input first; also the host time to issue one eager call) and chain (calls back to back,
which flatters a kernel that lets the next one start early). Workloads: plain (out of
place, one stream), in-place, two-streams, after-large. Every timed sample's last output is
checked exactly; a row that was not checked says so.

The driver is car_nccl_bench (built beside the library by scripts/build.sh), or nccl-tests'
all_reduce_perf with --all-reduce-perf (the chain mode only). Sizes are in bytes of the whole
message, as nccl-tests counts them (all-gather's output, reduce-scatter's input): a size that
is not a whole number of elements (per rank, but for all-reduce) is rounded down.

exit codes: 0 all runs passed with no wrong result, 1 a run failed or a result was wrong,
2 usage error, 3 the driver, the library, GPUs or MPS are missing."""

EPILOG = """\
examples:
  nccl-car bench
  nccl-car bench --modes model --workloads plain --sizes 1K,64K,1M --repeats 7
  nccl-car bench --one-gpu 4 --save /tmp/runs        # the one-GPU rig, under MPS
  nccl-car bench --dtypes int32,fp8e4m3 --ops sum,max,avg --configs car-1shot,car-2shot
  nccl-car bench --from /tmp/runs
  nccl-car bench --all-reduce-perf ~/nccl-tests/build/all_reduce_perf --launcher "mpirun -np 4"

NCCL_CAR_* variables set when calling bench (NCCL_CAR_MAX_BYTES=..., ...) apply to the
runs with nccl-car."""

# Sub-1 KiB, non-powers of two and powers of two up to the library's default limit.
DEFAULT_SIZES = (256, 1000, 1 << 10, 4 << 10, 16 << 10, 48 << 10, 64 << 10, 256 << 10, 1 << 20, 3 << 20, 8 << 20)
# nccl-tests doubles from -b to -e.
ALL_REDUCE_PERF_SIZES = (1 << 10, 16 << 20)
# Options that shape the runs, with their defaults: --from takes them from the folder instead.
RUN_DEFAULTS = {"all_reduce_perf": None, "car_nccl_bench": None, "lib": None,
                "configs": [], "dtypes": ["bfloat16"], "ops": [DEFAULT_OP], "modes": ["model", "isolated"],
                "workloads": list(WORKLOADS), "sizes": None, "min_bytes": None, "max_bytes": None,
                "repeats": 5, "seed": None, "no_probe": False, "collective": COLLECTIVES[0],
                "graph_iters": None, "gpus": None, "one_gpu": None, "launcher": None, "extra_args": [],
                "in_place": False, "timeout": 600, "save": None}
# Only nccl-tests has these: given without a driver option, they choose all_reduce_perf.
NCCL_TESTS_ONLY = ("launcher", "in_place", "graph_iters")
# Only our program has these.
CAR_NCCL_BENCH_ONLY = ("sizes", "modes", "workloads", "one_gpu", "collective")
MPS_PIPE_DEFAULT = "/tmp/nvidia-mps"


def _list_of(allowed, what):
    def parse(text):
        chosen_values = []
        for word in (w.strip() for w in text.split(",")):
            key = word if word in allowed else word.lower()
            if key not in allowed:
                raise argparse.ArgumentTypeError(
                    f"unknown {what} '{word}': expected some of {', '.join(sorted(set(allowed)))}")
            value = allowed[key] if isinstance(allowed, dict) else key
            if value not in chosen_values:
                chosen_values.append(value)
        return chosen_values
    return parse


def _names(text):
    """Comma-separated names, each once, checked later against what the library has."""
    names = [word.strip() for word in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"an empty name in '{text}'")
    return sorted(set(names), key=names.index)


def _sizes(text):
    values = [options.positive_size(word) for word in text.split(",")]
    return sorted(set(values), key=values.index)


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.set_defaults(**RUN_DEFAULTS)
    driver = parser.add_mutually_exclusive_group()
    driver.add_argument("--car-nccl-bench", metavar="PATH",
                        help="our benchmark program (default: the car_nccl_bench built or installed with the library)")
    driver.add_argument("--all-reduce-perf", metavar="PATH",
                        help="nccl-tests' all_reduce_perf instead: the chain mode only (found on PATH when our "
                             "program is missing)")
    options.add_library_option(parser, "to measure")
    parser.add_argument("--nccl", metavar="PATH",
                        help="the real libnccl.so.2 every run uses, NCCL's and the library's alike (its folder first "
                             "on LD_LIBRARY_PATH; the library forwards to it through NCCL_CAR_NCCL_LIB): to compare "
                             "against another NCCL than the one the program finds, e.g. 2.32.3's")
    parser.add_argument("--configs", type=_names, metavar="LIST",
                        help="variants of nccl-car to run as well: car-KERNEL (NCCL_CAR_ALGO=KERNEL) for each "
                             f"{VARIANTS_FROM} kernel the library has, as `nccl_car_query policy` names them")
    parser.add_argument("--collective", choices=COLLECTIVES,
                        help="what is measured (default all-reduce; the others: car_nccl_bench only)")
    parser.add_argument("--dtypes", type=_list_of(SPELLINGS, "dtype"), metavar="LIST",
                        help=f"comma-separated, nccl-tests' names: {', '.join(DTYPES)}; or the library's: "
                             f"{', '.join(sorted(set(LIBRARY_NAMES.values()) - set(DTYPES)))} (default bfloat16)")
    parser.add_argument("--ops", type=_list_of(OPS, "op"), metavar="LIST",
                        help=f"comma-separated: {', '.join(OPS)} (default {DEFAULT_OP})")
    parser.add_argument("--modes", type=_list_of(MODES, "mode"), metavar="LIST",
                        help="model, isolated, chain (default model,isolated)")
    parser.add_argument("--workloads", type=_list_of(WORKLOADS, "workload"), metavar="LIST",
                        help=f"{', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--sizes", type=_sizes, metavar="LIST",
                        help="bytes, comma-separated, e.g. 256,1000,1K,3M (default "
                             f"{','.join(short_size(size) for size in DEFAULT_SIZES)})")
    parser.add_argument("--min-bytes", type=options.positive_size, metavar="SIZE",
                        help="instead of --sizes: doubling from SIZE to --max-bytes (all_reduce_perf: default 1K)")
    parser.add_argument("--max-bytes", type=options.positive_size, metavar="SIZE",
                        help="the largest size when doubling (all_reduce_perf: default 16M)")
    parser.add_argument("--repeats", type=options.positive_int, metavar="N",
                        help="runs of each configuration per dtype and op; the median and the lowest and highest "
                             "are reported (default 5)")
    parser.add_argument("--seed", type=options.int_between(0, 1 << 31), metavar="N",
                        help="seed of the shuffled order (default: a new one, printed)")
    parser.add_argument("--no-probe", action="store_true",
                        help="skip the probe runs that read NCCL's choice of algorithm and protocol")
    launch = parser.add_mutually_exclusive_group()
    launch.add_argument("--gpus", type=options.positive_int, metavar="N",
                        help="GPUs to use, one rank each (default: every visible GPU)")
    launch.add_argument("--one-gpu", type=options.int_between(2, 64), metavar="N",
                        help="N ranks as processes on GPU 0, for the one-GPU rig: needs MPS running "
                             "(tests/e2e/mps.sh start)")
    launch.add_argument("--launcher", type=options.command_words, metavar="COMMAND",
                        help='all_reduce_perf only: prefix that starts one rank per GPU, e.g. "mpirun -np 4"')
    parser.add_argument("--graph-iters", type=options.positive_int, metavar="N",
                        help="all_reduce_perf only: graph launches per measurement, -G N (default 10)")
    parser.add_argument("--in-place", action="store_true", help="all_reduce_perf only: the in-place columns")
    parser.add_argument("--extra-args", type=options.words, metavar="ARGS",
                        help='more options for the driver, last, so they win: e.g. --extra-args="--samples 31 '
                             '--layers 8" for car_nccl_bench, "-n 50" for all_reduce_perf')
    parser.add_argument("--timeout", type=options.positive_int, metavar="SECONDS",
                        help="a run taking longer is killed and counted as failed (default 600)")
    folder = parser.add_mutually_exclusive_group()
    folder.add_argument("--save", metavar="DIR", help="keep every run's raw output in DIR, with DIR/bench.json")
    folder.add_argument("--from", dest="from_folder", metavar="DIR",
                        help="print the table from a folder written by --save; runs nothing")
    parser.add_argument("--csv", default="nccl-car-bench.csv", metavar="PATH",
                        help="CSV output, every figure (default nccl-car-bench.csv)")
    parser.add_argument("--chart", default="nccl-car-bench.png", metavar="PATH",
                        help="the chart, .png, .svg or .pdf, drawn when matplotlib is installed "
                             "(default nccl-car-bench.png)")


def _option(name):
    return "--" + name.replace("_", "-")


def _given(args, names):
    return [name for name in names if getattr(args, name) != RUN_DEFAULTS[name]]


def check_usage(args):
    if args.from_folder:
        given = [_option(name) for name, default in RUN_DEFAULTS.items() if getattr(args, name) != default]
        if given:
            raise UsageError(f"--from takes the runs' options from the folder: drop {', '.join(given)}")
        return
    if args.sizes and (args.min_bytes or args.max_bytes):
        raise UsageError("--sizes or --min-bytes/--max-bytes, not both")
    low, high = args.min_bytes or ALL_REDUCE_PERF_SIZES[0], args.max_bytes or ALL_REDUCE_PERF_SIZES[1]
    if low > high:
        raise UsageError(f"--min-bytes ({format_size(low)}) is above --max-bytes ({format_size(high)})")
    if args.collective == "all-gather" and args.ops != RUN_DEFAULTS["ops"]:
        raise UsageError("--ops: an all-gather reduces nothing")
    if args.car_nccl_bench and _given(args, NCCL_TESTS_ONLY):
        raise UsageError(f"{', '.join(map(_option, _given(args, NCCL_TESTS_ONLY)))}: all_reduce_perf only, "
                         "not car_nccl_bench")
    if (args.all_reduce_perf or _given(args, NCCL_TESTS_ONLY)) and _given(args, CAR_NCCL_BENCH_ONLY):
        raise UsageError(f"{', '.join(map(_option, _given(args, CAR_NCCL_BENCH_ONLY)))}: car_nccl_bench only, "
                         "not all_reduce_perf")
    if args.gpus is not None and args.gpus < 2 and not (args.all_reduce_perf or _given(args, NCCL_TESTS_ONLY)):
        raise UsageError(f"car_nccl_bench needs 2 or more ranks: --gpus {args.gpus} (one GPU: --one-gpu N)")


MISSING_DRIVER = """\
no benchmark program: no car_nccl_bench at {program} (scripts/build.sh builds it there
when CMake finds NCCL's library) and no all_reduce_perf on PATH. Pass
--car-nccl-bench PATH, or build nccl-tests (it is not part of this repository):
  git clone https://github.com/NVIDIA/nccl-tests
  make -C nccl-tests MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=<folder with include/nccl.h and lib/>
and pass --all-reduce-perf nccl-tests/build/all_reduce_perf (for --launcher mpirun, build with
MPI=1 MPI_HOME=<your MPI>)."""

MISSING_MPS = """\
--one-gpu runs several processes on one GPU, which needs MPS (without it their kernels never
run at the same time, and ours wait for each other until the timeout): no MPS control pipe
in {pipe}. Start it and point the runs at it:
  tests/e2e/mps.sh start
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/nccl-car-mps-pipe"""


def require_mps(env):
    """--one-gpu's prerequisite: an MPS control pipe where the runs will look for it."""
    pipe = env.get("CUDA_MPS_PIPE_DIRECTORY", MPS_PIPE_DEFAULT)
    if not os.path.exists(os.path.join(pipe, "control")):
        raise MissingPrerequisite(MISSING_MPS.format(pipe=pipe))


def require_nccl_file(path):
    """--nccl's value, None or a file the programs can load NCCL from."""
    if path and (not os.path.isfile(path) or os.path.basename(path) != "libnccl.so.2"):
        raise MissingPrerequisite(f"--nccl {path}: not a file named libnccl.so.2 (the programs load NCCL by "
                                  "that name)")


def _executable(path, option):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise MissingPrerequisite(f"{option}: no executable at {path}")
    return os.path.abspath(path)


def _choose_program(args, library):
    """(driver name, program path): the option given; else our program when it exists and
    no all_reduce_perf-only option was given; else all_reduce_perf on PATH."""
    if args.all_reduce_perf:
        return AllReducePerf.name, _executable(args.all_reduce_perf, "--all-reduce-perf")
    if args.car_nccl_bench:
        return CarNcclBench.name, _executable(args.car_nccl_bench, "--car-nccl-bench")
    program = default_program(library)
    if os.path.isfile(program) and os.access(program, os.X_OK) and not _given(args, NCCL_TESTS_ONLY):
        return CarNcclBench.name, program
    found = shutil.which("all_reduce_perf")
    if found is None or _given(args, CAR_NCCL_BENCH_ONLY):
        raise MissingPrerequisite(MISSING_DRIVER.format(program=program))
    return AllReducePerf.name, found


def _doubling(low, high):
    sizes = []
    while low <= high:
        sizes.append(low)
        low *= 2
    return sizes


def prerequisites(args):
    """(driver, library): what is missing, in the order a user would fix it."""
    library, source = paths.library_location(args.lib, os.environ)
    # The library first: the benchmark program is looked for beside it.
    if not os.path.isfile(library):
        raise MissingPrerequisite(paths.library_missing_message(library, source))
    if not paths.is_shared_library(library):
        raise MissingPrerequisite(f"{library} (from {source}) is not a shared library: it takes libnccl-car.so")
    name, program = _choose_program(args, library)
    require_nccl_file(args.nccl)
    if name == CarNcclBench.name:
        if args.one_gpu:
            require_mps(os.environ)
        elif args.gpus is None:
            args.gpus = gpu_probe.visible_gpu_count()
            if args.gpus < 2:
                raise MissingPrerequisite(f"car_nccl_bench needs 2 or more GPUs; {args.gpus} visible (see nccl-car "
                                          "doctor); on one GPU, --one-gpu N runs N ranks there under MPS")
        sizes = args.sizes or (_doubling(args.min_bytes or ALL_REDUCE_PERF_SIZES[0], args.max_bytes or 8 << 20)
                               if args.min_bytes or args.max_bytes else list(DEFAULT_SIZES))
        return CarNcclBench(program, sizes, args.modes, args.workloads, args.one_gpu or args.gpus,
                            bool(args.one_gpu), args.extra_args, args.collective), library
    if args.launcher:
        if shutil.which(args.launcher[0]) is None:
            raise MissingPrerequisite(f"launcher not found: {args.launcher[0]}")
    elif args.gpus is None:
        args.gpus = gpu_probe.visible_gpu_count()
        if args.gpus == 0:
            raise MissingPrerequisite("no GPU visible (see nccl-car doctor); pass --gpus N or --launcher to run anyway")
    launcher_preload = paths.preload_without(os.environ.get("LD_PRELOAD"), library)
    low, high = args.min_bytes or ALL_REDUCE_PERF_SIZES[0], args.max_bytes or ALL_REDUCE_PERF_SIZES[1]
    return AllReducePerf(program, low, high, args.gpus, args.launcher, args.graph_iters or 10, args.in_place,
                         args.extra_args, launcher_preload), library


def _header(args, driver, library, configs, seed):
    """What --save writes at the top of bench.json and the report reads back."""
    return {"driver": driver.name, "program": driver.program,
            "library": library, "collective": args.collective,
            "configs": [config.name for config in configs], "dtypes": args.dtypes, "ops": args.ops,
            "modes": driver.row_modes, "workloads": driver.workloads,
            "sizes": getattr(driver, "sizes", None), "repeats": args.repeats, "seed": seed,
            "gpus": args.gpus, "one_gpu": args.one_gpu, "launcher": args.launcher, "host": socket.gethostname(),
            "nccl": os.path.abspath(args.nccl) if args.nccl else None,
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def _choice_table(env, library, dtypes):
    """The choice table the library's runs will follow ({path, rows, families: {dtype: the
    library's family}}), None where none applies (or the library cannot say)."""
    query, _unavailable = library_query.find(env, library)
    nccl = host_probe.locate_nccl(env, sys.path, exclude=library)
    table = library_query.applicable_table(env, query, host_probe.encode_version(nccl["version"]), True)
    if not table["used"]:
        return None
    families = {library_type: entry["name"] for entry in query.policy(env)["type_families"]
                for library_type in entry["types"]}
    return {"path": table["path"], "rows": table["table_rows"],
            "families": {dtype: families.get(LIBRARY_NAMES[dtype]) for dtype in dtypes}}


def _table_winners(header, rows, links):
    """{(dtype, size): what the choice table gives that size} for the report's table column, on
    a communicator of that case (NVLINK or PCIE, as the runs' setup: lines said)."""
    table = header.get("choice_table")
    if not table:
        return None
    ranks = header.get("one_gpu") or header.get("gpus")
    collective = header.get("collective", COLLECTIVES[0])
    unmeasured = "untuned" if links == PCIE else "built-in"
    return {(row.dtype, row.size): winner_at(table["rows"], collective, ranks, links, table["families"].get(row.dtype),
                                             row.size) or unmeasured
            for row in rows}


def _links(analysis):
    """PCIE where a run of the library set up a PCIe communicator, else NVLINK."""
    return PCIE if any(tally.links[PCIE] for tally in analysis.logs.values()) else NVLINK


def _progress(repeats):
    def report(number, total, job, record, failure):
        if record is None:
            print(f"[{number}/{total}] {job.describe(repeats)} ...", end=" ", file=sys.stderr, flush=True)
        elif failure:
            print(f"FAILED: {failure}", file=sys.stderr)
            print(f"    command: {shlex.join(record.command)}", file=sys.stderr)
            print("\n".join(tail("stdout", record.stdout) + tail("stderr", record.stderr)), file=sys.stderr)
        else:
            print(f"{record.seconds:.1f} s", file=sys.stderr)
    return report


def _reader(header):
    """A driver that reads the runs of a saved folder (it runs nothing)."""
    if header["driver"] == CarNcclBench.name:
        return CarNcclBench(header.get("program") or "", [], [], [], 2,
                            collective=header.get("collective", COLLECTIVES[0]))
    if header["driver"] == AllReducePerf.name:
        return AllReducePerf("", 0, 0, 0, None, 0, header["workloads"] == ["in-place"], [], None)
    raise UsageError(f"unknown driver {header['driver']!r} in bench.json")


def _print_logs(analysis, configs):
    for config in (config for config in configs if config.with_car):
        tally = analysis.logs[config.name]
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


def _report(header, configs, records, driver, csv_path, chart_path):
    """Prints the table and the rest from the runs' records; returns the exit status."""
    analysis = analyse(records, driver, header["repeats"])
    rows = rows_of(analysis.samples, analysis.choices, configs, header["dtypes"], header["ops"],
                   header["workloads"], header["modes"])
    if header.get("one_gpu"):
        where = f"{header['one_gpu']} ranks on one GPU (processes under MPS)"
    else:
        where = f"{header['gpus']} GPU(s)" if header.get("gpus") else shlex.join(header.get("launcher") or [])
    order = f"shuffled order, seed {header['seed']}" if header.get("seed") is not None else "fixed order"
    title = (f"{header.get('collective', 'all-reduce')}, {header['driver']} on {where}, {header['repeats']} run(s) "
             f"per configuration in {order}")
    print(f"{title} ({header.get('host', '?')}, {header.get('started', '?')})")
    if header["repeats"] < 5:
        print(f"note: {header['repeats']} run(s) per configuration; a spread needs 5 or more")
    print(format_tables(rows, configs, header["repeats"], _table_winners(header, rows, _links(analysis))))
    print()
    for line in verdict_lines(rows):
        print(line)
    write_csv(csv_path, rows, configs)
    problem = write_chart(chart_path, rows, f"nccl-car against NCCL's best ({title})")
    if problem is None:
        print(f"wrote {csv_path} and {chart_path}")
    elif problem == NO_MATPLOTLIB:
        print(f"wrote {csv_path}; chart not drawn: {problem} (pip install matplotlib draws it)")
    else:
        print(f"wrote {csv_path}; chart not drawn: {problem}")
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


def library_kernels(env, library):
    """A function giving the library's kernels that --configs can force (VARIANTS_FROM's),
    asked of its query program when first called: bench types no kernel name."""
    def kernels():
        query, unavailable = library_query.find(env, library)
        if query is None:
            raise MissingPrerequisite(f"the variants of ours are the library's kernels: {unavailable}")
        try:
            return library_query.kernels_by_collective(query.policy(env))[VARIANTS_FROM]
        except library_query.QueryUnavailable as error:
            raise MissingPrerequisite(f"the variants of ours are the library's kernels: {error}") from None
    return kernels


def execute(args):
    check_usage(args)
    library, _source = paths.library_location(args.lib, os.environ)
    kernels = library_kernels(os.environ, library)
    if args.from_folder:
        header, configs, records = load(args.from_folder, kernels)
        print(f"runs read from {args.from_folder}", file=sys.stderr)
        return _report(header, configs, records, _reader(header), args.csv, args.chart)
    try:
        configs = chosen(args.configs, kernels)
    except ValueError as error:
        raise UsageError(str(error)) from None
    driver, library = prerequisites(args)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    header = _header(args, driver, library, configs, seed)
    probe = not args.no_probe and driver.name == CarNcclBench.name
    jobs = plan(configs, args.dtypes, args.ops, driver.row_modes if driver.runs_per_form else None, args.repeats,
                seed, probe)
    header["choice_table"] = _choice_table(with_nccl(os.environ, args.nccl), library, args.dtypes)
    if header["choice_table"]:
        print(f"the library follows the choice table {header['choice_table']['path']}: the table column says what "
              "it gives each size", file=sys.stderr)
    saved = SavedRuns(args.save, header) if args.save else None
    records = run_all(jobs, driver, with_nccl(os.environ, args.nccl), library, args.timeout, _progress(args.repeats),
                      saved)
    return _report(header, configs, records, driver, args.csv, args.chart)
