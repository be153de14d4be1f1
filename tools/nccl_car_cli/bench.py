"""nccl-car bench: nccl-car against NCCL's best configuration, every configuration once per
repeat in a fixed order, so that drift (clocks, other jobs) hits all of them alike. The
driver is our own program (build/tests/car_nccl_bench) or nccl-tests' all_reduce_perf."""

import datetime
import os
import shlex
import socket
import sys
import time

from . import bench_configs, driver_all_reduce_perf, driver_car_nccl_bench
from .bench_folder import SavedRuns, load
from .bench_options import add_arguments, check_usage  # noqa: F401  (add_arguments: for main)
from .bench_plan import plan_jobs
from .bench_process import run_once, tail
from .bench_report import format_tables, verdict_lines
from .bench_runs import RunRecord, analyse, failure_of
from .bench_setup import prerequisites
from .csv_table import write_csv
from .errors import EXIT_FAILED, EXIT_OK, UsageError
from .results import HOST_MODE, any_wrong, rows_of
from .svg_chart import write_svg

PARSERS = {driver_car_nccl_bench.NAME: driver_car_nccl_bench.parse,
           driver_all_reduce_perf.NAME: driver_all_reduce_perf.parse}


def _header(args, driver, library, configs):
    """What --save writes at the top of bench.json and the report reads back."""
    modes = args.modes if driver.modes_per_run else args.modes + [HOST_MODE]
    return {"driver": driver.name, "program": driver.arguments[0], "library": library,
            "configs": [config.name for config in configs], "dtypes": args.dtypes, "ops": args.ops,
            "modes": modes,
            "repeats": args.repeats, "place": "in-place" if args.in_place else "out-of-place",
            "gpus": args.gpus, "launcher": args.launcher, "host": socket.gethostname(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def _run_all(args, driver, library, header):
    configs = [bench_configs.by_name(name) for name in header["configs"]]
    jobs = plan_jobs(configs, args.dtypes, args.ops, args.modes if driver.modes_per_run else None, args.repeats)
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


def _report(header, records, csv_path, svg_path):
    """Prints the table and the rest from the runs' records; returns the exit status."""
    configs = [bench_configs.by_name(name) for name in header["configs"]]
    analysis = analyse(records, PARSERS[header["driver"]], header["repeats"], header["place"] == "in-place")
    rows = rows_of(analysis.samples, configs, header["dtypes"], header["ops"], header["modes"])
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
    check_usage(args)
    if args.from_folder:
        header, records = _load(args.from_folder)
        return _report(header, records, args.csv, args.svg)
    driver, library = prerequisites(args)
    header = _header(args, driver, library, bench_configs.chosen(args.configs))
    records = _run_all(args, driver, library, header)
    return _report(header, records, args.csv, args.svg)
