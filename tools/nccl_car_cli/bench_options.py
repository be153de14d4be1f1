"""nccl-car bench's command line: its options, their defaults, and the combinations it
refuses before anything runs."""

import argparse

from . import bench_configs, options
from .bench_types import DEFAULT_OP, DTYPES, LIBRARY_NAMES, OPS, SPELLINGS
from .errors import UsageError
from .units import format_size

DESCRIPTION = """\
Runs NCCL in four configurations (nccl: alone; nccl-R2: buffers registered as symmetric
windows; nccl-gm0: NCCL_GRAPH_MIXING_SUPPORT=0; nccl-R2-gm0: both) and NCCL with
libnccl-car.so (car), each once per repeat in that order, and prints per size the median
time of NCCL alone, of NCCL's best configuration, of nccl-car, and nccl-car / best (below
1.00: nccl-car is faster); then the sizes where nccl-car is slower than NCCL's best. Every
dtype runs with every op (--dtypes, --ops); each pair has its own tables.

The driver is our own program, car_nccl_bench (built beside the library by
scripts/build.sh; it also measures the host time per call), or nccl-tests' all_reduce_perf
with --all-reduce-perf. Every size's result is checked. Sizes are in bytes: a size that is
not a whole number of elements is rounded down (both drivers do so).

exit codes: 0 all runs passed with no wrong result, 1 a run failed or a result was wrong,
2 usage error, 3 the driver, the library or GPUs are missing."""

EPILOG = """\
examples:
  nccl-car bench --dtypes bf16 --max-bytes 8M --repeats 2
  nccl-car bench --dtypes int32,fp8e4m3 --ops sum,max,avg
  nccl-car bench --configs car-1shot,car-2shot --save /tmp/runs
  nccl-car bench --from /tmp/runs
  nccl-car bench --all-reduce-perf ~/nccl-tests/build/all_reduce_perf --modes graph
  nccl-car bench --all-reduce-perf all_reduce_perf --launcher "mpirun -np 4" --extra-args "-n 50"

NCCL_CAR_* variables set when calling bench (NCCL_CAR_MAX_BYTES=..., ...) apply to the
runs with nccl-car."""

MODES = ("eager", "graph")
# Options that shape the runs, with their defaults: --from takes them from the folder instead.
RUN_DEFAULTS = {"all_reduce_perf": None, "car_nccl_bench": None, "lib": None,
                "configs": [], "dtypes": ["half", "bfloat16", "float"], "ops": [DEFAULT_OP], "modes": list(MODES),
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
    parser.add_argument("--dtypes", type=_list_of(SPELLINGS, "dtype"), metavar="LIST",
                        help=f"comma-separated, nccl-tests' names: {', '.join(DTYPES)}; or the library's: "
                             f"{', '.join(sorted(set(LIBRARY_NAMES.values()) - set(DTYPES)))} "
                             "(default: half, bfloat16, float)")
    parser.add_argument("--ops", type=_list_of(OPS, "op"), metavar="LIST",
                        help=f"comma-separated: {', '.join(OPS)} (default: {DEFAULT_OP}); every dtype runs "
                             "with every op")
    parser.add_argument("--modes", type=_list_of(MODES, "mode"), metavar="LIST",
                        help="comma-separated: eager, graph (default: both)")
    parser.add_argument("--min-bytes", type=options.positive_size, metavar="SIZE",
                        help="smallest size, e.g. 1K (default 1K); sizes double up to --max-bytes")
    parser.add_argument("--max-bytes", type=options.positive_size, metavar="SIZE",
                        help="largest size, e.g. 8M (default 16M)")
    parser.add_argument("--repeats", type=options.positive_int, metavar="N",
                        help="runs of each configuration per dtype and op (and mode); the median is reported "
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


def nccl_tests_options(args):
    return [name for name in NCCL_TESTS_ONLY if getattr(args, name) != RUN_DEFAULTS[name]]


def _option(name):
    return "--" + name.replace("_", "-")


def check_usage(args):
    if args.from_folder:
        given = [_option(name) for name, default in RUN_DEFAULTS.items() if getattr(args, name) != default]
        if given:
            raise UsageError(f"--from takes the runs' options from the folder: drop {', '.join(given)}")
        return
    if args.min_bytes > args.max_bytes:
        raise UsageError(f"--min-bytes ({format_size(args.min_bytes)}) is above --max-bytes "
                         f"({format_size(args.max_bytes)})")
    if args.car_nccl_bench and nccl_tests_options(args):
        raise UsageError(f"{', '.join(map(_option, nccl_tests_options(args)))}: all_reduce_perf "
                         "only, not car_nccl_bench")
