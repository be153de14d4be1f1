"""The runner's command line: picks scenarios, skips those this machine cannot run, runs the
others one after the other, prints every run's verdict, and exits 0 (all that ran passed),
1 (one failed), 77 (none could run here: ctest reports that as skipped) or 2 (usage)."""

import argparse
import os
import sys
import traceback

from . import requirements
from .all_scenarios import SCENARIOS, select
from .build import Build
from .context import Context, Skip
from .machine import Machine
from .tools_path import REPO_ROOT
from .verdict import FAIL, PASS, SKIPPED
from nccl_car_cli.library_query import QueryUnavailable  # noqa: E402  (tools/ is on the path: .verdict)

SKIP_EXIT_CODE = 77


def _arguments(argv):
    parser = argparse.ArgumentParser(
        prog="run_e2e.py", description="End-to-end runs of libnccl-car.so through the real NCCL on a machine with "
                                       "GPUs. See tests/README.md.")
    parser.add_argument("names", nargs="*", metavar="SCENARIO",
                        help="scenario names or shell patterns such as 'recovery-*' (default: every scenario)")
    parser.add_argument("--build", default=os.environ.get("CAR_BUILD_DIR", os.path.join(REPO_ROOT, "build")),
                        help="the build folder (default: $CAR_BUILD_DIR, else build/ of this repository)")
    parser.add_argument("--logs", help="where each scenario's logs go, one folder each (default: $E2E_LOGS, "
                                       "else BUILD/e2e-logs)")
    parser.add_argument("--all-reduce-perf", metavar="PATH",
                        help="nccl-tests' all_reduce_perf, an MPI build (the variable ALL_REDUCE_PERF wins); "
                             "all_gather_perf and reduce_scatter_perf are looked for beside it (ALL_GATHER_PERF, "
                             "REDUCE_SCATTER_PERF name others)")
    parser.add_argument("--label", help="only scenarios with this ctest label (e2e, gpu, multi-gpu)")
    parser.add_argument("--runs", metavar="PATTERN",
                        help="the every-op scenarios (nccl-tests-*-all-ops-*, -all-types-*): only the runs whose "
                             "log name matches, a shell pattern such as 'nt-ops-n4-unaligned-*'")
    parser.add_argument("--list", action="store_true", help="list the scenarios, their labels and what they need")
    parser.add_argument("--ctest-list", action="store_true", help=argparse.SUPPRESS)  # NAME LIMIT LABEL,LABEL
    return parser.parse_args(argv)


def _say(line):
    print(line, flush=True)


def run_scenario(scenario, machine, build, logs_root, say=_say, **context_options):
    """Runs one scenario (or skips it); returns PASS, FAIL or SKIPPED."""
    say(f"== {scenario.name}: {scenario.summary}")
    reason = requirements.missing(scenario.needs, machine, build)
    if reason is not None:
        say(f"{scenario.name}: SKIPPED ({reason})")
        return SKIPPED
    if not os.path.isfile(build.library):
        say(f"{scenario.name}: FAIL ({build.library} is not built)")
        return FAIL
    context = Context(build, machine, os.path.join(logs_root, scenario.name), say, **context_options)
    statuses = []
    try:
        for run, verdict in scenario.body(context):
            say(f"{scenario.name}: {run}: {verdict.status} ({verdict.detail})")
            statuses.append(verdict.status)
            for note in verdict.notes:
                say(f"  {note.strip()}")
    except Skip as skip:
        say(f"{scenario.name}: SKIPPED ({skip})")
        statuses.append(SKIPPED)
    except QueryUnavailable as error:  # the build is incomplete: no verdict can be given
        say(f"{scenario.name}: FAIL ({error})")
        statuses.append(FAIL)
    except Exception:  # a broken scenario fails, and says where
        say(f"{scenario.name}: FAIL (the runner broke):\n{traceback.format_exc()}")
        statuses.append(FAIL)
    if context.runs and not context.runs_chosen and (PASS in statuses or FAIL in statuses):
        say(f"{scenario.name}: --runs {context.runs} does not apply here (only to the every-op scenarios): "
            "every run was made")
    status = FAIL if FAIL in statuses or not statuses else PASS if PASS in statuses else SKIPPED
    say(f"{scenario.name}: {status} (logs in {context.logs})")
    return status


def exit_code(statuses):
    if FAIL in statuses:
        return 1
    return 0 if PASS in statuses else SKIP_EXIT_CODE


def main(argv=None):
    args = _arguments(sys.argv[1:] if argv is None else argv)
    chosen = select(args.names, args.label)
    if args.ctest_list:
        for scenario in SCENARIOS.values():
            print(scenario.name, scenario.limit, ",".join(scenario.labels))
        return 0
    if not chosen:
        print(f"run_e2e.py: no scenario matches {' '.join(args.names) or '--label ' + str(args.label)}; "
              "--list shows them", file=sys.stderr)
        return 2
    if args.list:
        for scenario in chosen:
            print(f"{scenario.name:34} [{','.join(scenario.labels)}] {scenario.summary} "
                  f"(needs {', '.join(scenario.needs)})")
        return 0
    build = Build(args.build)
    logs = args.logs or os.environ.get("E2E_LOGS") or os.path.join(build.folder, "e2e-logs")
    machine = Machine(all_reduce_perf=args.all_reduce_perf)
    statuses = [run_scenario(scenario, machine, build, logs, runs=args.runs) for scenario in chosen]
    if len(chosen) > 1:
        counts = {status: statuses.count(status) for status in (PASS, FAIL, SKIPPED)}
        _say(f"e2e: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIPPED]} skipped")
    return exit_code(statuses)
