"""nccl-car tune: on this machine, which kernel of ours, or NCCL, is fastest for each
collective, world size, type family and size; written as the choice table the library then
follows (plugin/choice_table.h). The measuring is bench's: car_nccl_bench in its isolated
(or model-like) mode, every timed output checked, NCCL's default and each of our kernels
alternating in a shuffled order; the rule that turns the medians into rows is tune_table's."""

import argparse
import os
import re
import shlex
import shutil
import sys
import tempfile
import time

from . import gpu_probe, library_query, options, paths
from .bench import require_mps, require_nccl_file
from .bench_drivers import LIBRARY_NAMES, CarNcclBench, default_program
from .bench_results import rows_of
from .bench_runs import Config, Job, analyse, car_forcing, plan, run_all, tail, with_nccl
from .errors import EXIT_FAILED, EXIT_OK, MissingPrerequisite, UsageError
from .logparse import LogTally, taken_calls
from .tune_table import (ANY_FAMILY, NCCL, NVLINK, PCIE, Group, decide, probe_table_text, rows_of as table_rows_of,
                         table_text, winner_at)
from .units import format_size

DESCRIPTION = """\
Measures, on this machine, each kernel of ours against NCCL's default for every collective
the library takes, at each world size asked for, for each type family (16-bit floats, fp32,
fp8, the types that travel split: integers and fp64), at sizes from 4 B to the library's
limit; writes the winners as a choice table, reads it back through the library's parser,
and checks with one more run per group that the library follows it (its TRACE lines).

Each world size is first run once with the library, whose setup: line says which case the
communicator is: NVLink between every pair, or PCIe. Over PCIe only the push kernels are
measured (the library never runs a pull kernel there), and the rows say PCIe: the library
takes nothing over PCIe that such a row does not give it.

A size goes to a kernel of ours only where it was faster than NCCL in both the graph and
the eager form of the mode; ties and everything else go to NCCL. The library finds the
table in ~/.cache/nccl-car/ (XDG_CACHE_HOME), keyed by this machine's fingerprint (GPUs,
NVLinks, driver, CUDA, NCCL and library build): after any of those change, tune again.
NCCL_CAR_TABLE names another file; NCCL_CAR_TABLE=builtin ignores every table.

Time: about 2 s a run here; the plan printed first says how many runs (the defaults: a few
minutes per world size).

exit codes: 0 table written and followed, 1 a run failed, a result was wrong or the library
does not follow the table, 2 usage error, 3 the library, the benchmark program, the query
program, GPUs or MPS are missing."""

EPILOG = """\
examples:
  nccl-car tune                                   # every GPU, and 2 of them
  nccl-car tune --ranks 8 --collectives all-reduce
  nccl-car tune --one-gpu --ranks 2,4,8           # the one-GPU rig, under MPS
  NCCL_CAR_TABLE=/shared/h200x8.table nccl-car tune --output /shared/h200x8.table"""

MODES = ("isolated", "model")
# The collective whose message is every rank's whole buffer (the others' sizes count every
# rank's part), and the one whose kernels NCCL_CAR_ALGO forces.
ALL_REDUCE = "all-reduce"
# The type each family is timed with, where the family has it (else its first type).
PREFERRED_TYPES = ("bf16", "fp32", "fp8e4m3", "int32")
SECONDS_PER_RUN = 2.0    # for the plan's estimate only
_NCCL_VERSION = re.compile(r"^# car_nccl_bench: .*NCCL (\d+)", re.MULTILINE)


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--ranks", type=_rank_list, metavar="LIST",
                        help="world sizes, comma-separated (default: every visible GPU, and 2; --one-gpu: 2)")
    parser.add_argument("--one-gpu", action="store_true",
                        help="every rank a process on GPU 0, for the one-GPU rig: needs MPS (tests/e2e/mps.sh start)")
    parser.add_argument("--collectives", type=_word_list, metavar="LIST",
                        help="some of the collectives the library takes (default: all of them)")
    parser.add_argument("--families", type=_word_list, metavar="LIST",
                        help="some of the library's type families: half, float, fp8, split (default: all)")
    parser.add_argument("--mode", choices=MODES, default="isolated",
                        help="isolated: a plain kernel writes each call's input (default); model: a GEMM before "
                             "each call, slower to measure")
    parser.add_argument("--repeats", type=options.positive_int, default=3, metavar="N",
                        help="runs of each configuration per group, in shuffled order (default 3)")
    parser.add_argument("--samples", type=options.positive_int, default=9, metavar="N",
                        help="timed samples per size and run (default 9)")
    parser.add_argument("--seed", type=options.int_between(0, 1 << 31), metavar="N",
                        help="seed of the shuffled order (default: a new one, printed)")
    parser.add_argument("--output", metavar="PATH",
                        help="where the table goes (default: this machine's in the cache folder, where the "
                             "library looks)")
    options.add_library_option(parser, "to measure")
    parser.add_argument("--car-nccl-bench", metavar="PATH",
                        help="the benchmark program (default: the one built or installed with the library)")
    parser.add_argument("--nccl", metavar="PATH",
                        help="the real libnccl.so.2 to measure and tune for (default: the one the program finds)")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip the last runs that check the library follows the table")
    parser.add_argument("--timeout", type=options.positive_int, default=300, metavar="SECONDS",
                        help="a run taking longer is killed and counted as failed (default 300)")


def _rank_list(text):
    try:
        values = sorted({int(word) for word in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of world sizes: '{text}'") from None
    if not values or values[0] < 2:
        raise argparse.ArgumentTypeError("world sizes start at 2")
    return values


def _word_list(text):
    words = [word.strip() for word in text.split(",") if word.strip()]
    if not words:
        raise argparse.ArgumentTypeError("an empty list")
    return list(dict.fromkeys(words))


def _chosen(given, known, what):
    if given is None:
        return list(known)
    unknown = [word for word in given if word not in known]
    if unknown:
        raise UsageError(f"unknown {what} {', '.join(unknown)}: the library has {', '.join(known)}")
    return [word for word in known if word in given]


def _sizes(limit, smallest):
    """4 B, 16 B, ... (times 4) up to the limit, and the limit itself; none under `smallest`."""
    sizes, size = [], 4
    while size < limit:
        if size >= smallest:
            sizes.append(size)
        size *= 4
    return sizes + [limit] if limit >= smallest else sizes


class Setup:
    """What tune works with: the library, the programs, the library's policy and limits."""

    def __init__(self, args, env):
        self.library, source = paths.library_location(args.lib, env)
        if not os.path.isfile(self.library):
            raise MissingPrerequisite(paths.library_missing_message(self.library, source))
        self.program = os.path.abspath(args.car_nccl_bench or default_program(self.library))
        if not (os.path.isfile(self.program) and os.access(self.program, os.X_OK)):
            raise MissingPrerequisite(f"no benchmark program at {self.program}: scripts/build.sh builds "
                                      "car_nccl_bench beside the library, --car-nccl-bench names another")
        self.query, unavailable = library_query.find(env, self.library)
        if self.query is None:
            raise MissingPrerequisite(unavailable)
        require_nccl_file(args.nccl)
        self.env = with_nccl(env, args.nccl)
        try:
            self.policy = self.query.policy(self.env)
        except library_query.QueryUnavailable as error:
            raise MissingPrerequisite(str(error)) from None
        types = {entry["name"]: entry["bytes"] for entry in self.policy["element_types"]}
        self.type_bytes = {name: types[library] for name, library in LIBRARY_NAMES.items() if library in types}
        self.tests_name = {library: name for name, library in LIBRARY_NAMES.items()}

    def kernels(self, collective, links=NVLINK):
        """The kernels that serve `collective` and can run under the caller's settings: the
        pull kernels only where the settings give them buffers, and never over PCIe."""
        return [kernel for kernel in self.policy["kernels"] if kernel["collective"] == collective
                and (kernel["family"] == "push" or (self.policy["pull_buffers"] and links != PCIE))]

    def configs(self, collective, links=NVLINK, probe_table=None):
        """NCCL's default, then ours: each kernel forced, where NCCL_CAR_ALGO can force it (the
        all-reduce's), else the library's own choice (its TRACE lines name the kernel), which
        over PCIe (no built-in sizes) is what `probe_table` gives it: every size. Every run of
        ours ignores any table already there."""
        if collective == ALL_REDUCE:
            ours = [car_forcing(kernel["name"]) for kernel in self.kernels(collective, links)]
        else:
            ours = [Config("car", with_car=True)]
        table = probe_table if links == PCIE and collective != ALL_REDUCE else library_query.BUILT_IN_TABLE
        return [Config(NCCL)] + [Config(c.name, with_car=True, car_variables=c.car_variables +
                                        (("NCCL_CAR_TABLE", table),)) for c in ours]

    def chosen(self, args):
        """(collectives, type families) of --collectives and --families, checked against the
        library's own: before the GPUs are counted, so that a wrong option is said first."""
        families = [entry["name"] for entry in self.policy["type_families"]]
        return (_chosen(args.collectives, self.policy["collectives"], "collective"),
                _chosen(args.families, families, "type family"))

    def groups(self, args, cases):
        """The groups to measure at each world size the library takes ({ranks: NVLINK or PCIE}),
        each marked with its case."""
        collectives, chosen_families = self.chosen(args)
        families = {entry["name"]: entry["types"] for entry in self.policy["type_families"]}
        groups = []
        for world, links in cases.items():
            for collective in collectives:
                kernels = self.kernels(collective, links)
                if not kernels or self.policy["max_bytes"][collective] == 0:
                    continue   # nothing of ours to measure: the library forwards it anyway
                if all(kernel["copies_bits"] for kernel in kernels):
                    groups.append(Group(collective, world, ANY_FAMILY, "bfloat16", links))
                    continue
                for family in chosen_families:
                    types = families[family]
                    timed = next((t for t in PREFERRED_TYPES if t in types), types[0])
                    groups.append(Group(collective, world, family, self.tests_name[timed], links))
        return groups

    def sizes(self, group):
        smallest = self.type_bytes[group.dtype] * (1 if group.collective == ALL_REDUCE else group.ranks)
        return _sizes(self.policy["max_bytes"][group.collective], smallest)


def _default_ranks(args):
    if args.one_gpu:
        require_mps(os.environ)
        return args.ranks or [2]
    visible = gpu_probe.visible_gpu_count()
    if visible < 2:
        raise MissingPrerequisite(f"tune needs 2 or more GPUs; {visible} visible (see nccl-car doctor); on one "
                                  "GPU, --one-gpu runs the ranks there under MPS")
    ranks = args.ranks or sorted({2, visible})
    if ranks[-1] > visible:
        raise UsageError(f"--ranks {ranks[-1]}: only {visible} GPUs visible (--one-gpu for the rig)")
    return ranks


class Progress:
    """One line per run, with a bar and the time left, on stderr."""

    def __init__(self, total):
        self.total, self.done, self.started = total, 0, time.monotonic()

    def __call__(self, label):
        def report(_number, _count, job, record, failure):
            if record is None:
                return
            self.done += 1
            width = 30
            filled = width * self.done // self.total
            left = (time.monotonic() - self.started) / self.done * (self.total - self.done)
            state = f"FAILED: {failure}" if failure else f"{record.seconds:.1f} s"
            print(f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {label}: "
                  f"{job.config.name}{', probe' if job.probe else ''} {state} (about {left / 60:.1f} min left)",
                  file=sys.stderr, flush=True)
            if failure:
                print(f"    command: {shlex.join(record.command)}", file=sys.stderr)
                print("\n".join(tail("stdout", record.stdout) + tail("stderr", record.stderr)), file=sys.stderr)
        return report


def _traced(probe_config):
    """The configuration with TRACE lines: one per call it took, naming the kernel."""
    return Config(probe_config.name, with_car=True, car_variables=probe_config.car_variables +
                  (("NCCL_CAR_DEBUG", "TRACE"),))


def _taken_by_size(record, group):
    """{whole-message bytes: kernel} of the calls of `group`'s collective and type that rank 0
    of the run traced (the bench's own barriers use other types or sizes)."""
    library_type = LIBRARY_NAMES[group.dtype]
    return {call.message_bytes(group.ranks): call.kernel for call in taken_calls(record.stderr)
            if call.rank == 0 and call.collective == group.collective and call.type == library_type}


class Tuner:
    def __init__(self, args, setup):
        self.args, self.setup = args, setup
        self.seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") >> 1
        self.nccl_version = None
        self.machine = None        # the query's fingerprint answer, once the NCCL version is known
        self.folder = None         # where the probe tables of PCIe groups go (removed at the end)

    def driver(self, group, sizes):
        return CarNcclBench(self.setup.program, sizes, [self.args.mode], ["plain"], group.ranks, self.args.one_gpu,
                            ["--samples", str(self.args.samples)], group.collective)

    def case_of(self, ranks, progress):
        """(NVLINK or PCIE, None), or (None, why) where the library takes no communicator of
        `ranks` ranks here: one probe run with the library, whose setup: lines say."""
        group = Group(ALL_REDUCE, ranks, ANY_FAMILY, "bfloat16")
        config = _traced(Config("car-case", with_car=True,
                                car_variables=(("NCCL_CAR_TABLE", library_query.BUILT_IN_TABLE),)))
        records, _analysis = self.run(group, [Job(config, group.dtype, "sum", None, -1, True)],
                                      self.driver(group, [self.setup.sizes(group)[0]]),
                                      progress(f"{ranks} ranks: which case"))
        tally = LogTally()
        for line in records[0].stderr.splitlines():
            tally.feed(line)
        if tally.links[PCIE]:
            return PCIE, None
        if tally.links[NVLINK]:
            return NVLINK, None
        reasons = "; ".join(tally.not_eligible) or "no setup: line"
        return None, reasons

    def fingerprint(self):
        """This machine as a choice table sees it, asked once (after the first run, which says
        the NCCL version)."""
        if self.machine is None:
            try:
                self.machine = self.setup.query.fingerprint(self.setup.env, 0, self.nccl_version)
            except library_query.QueryUnavailable as error:
                raise MissingPrerequisite(f"cannot fingerprint this machine: {error}") from None
        return self.machine

    def probe_table(self, group):
        """Over PCIe, where the library has no built-in size, a table that gives the group's
        collective's kernel every size, for the runs that time it: its path."""
        if group.links != PCIE or group.collective == ALL_REDUCE:
            return None
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="nccl-car-tune-")
        kernel = self.setup.kernels(group.collective, PCIE)[0]["name"]
        path = os.path.join(self.folder, f"{group.collective}-{group.ranks}.table")
        with open(path, "w") as out:
            out.write(probe_table_text(self.fingerprint()["fingerprint"], group.collective, group.ranks, PCIE, kernel,
                                       self.setup.policy["max_bytes"][group.collective]))
        return path

    def jobs(self, group):
        configs = self.setup.configs(group.collective, group.links, self.probe_table(group))
        probes = [Job(_traced(config), group.dtype, "sum", None, -1, True) for config in configs[1:]]
        return configs, probes + plan(configs, [group.dtype], ["sum"], None, self.args.repeats, self.seed, False)

    def run(self, group, jobs, driver, progress):
        records = run_all(jobs, driver, self.setup.env, self.setup.library, self.args.timeout, progress)
        analysis = analyse(records, driver, self.args.repeats)
        if analysis.failures:
            raise RunFailed(group, analysis.failures)
        if self.nccl_version is None:
            found = next((m for m in map(_NCCL_VERSION.search, (r.stdout for r in records)) if m), None)
            self.nccl_version = int(found.group(1)) if found else None
        return records, analysis

    def cleanup(self):
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def measure(self, group, progress):
        """The group's Verdicts, one per size measured."""
        sizes = self.setup.sizes(group)
        configs, jobs = self.jobs(group)
        driver = self.driver(group, sizes)
        records, analysis = self.run(group, jobs, driver, progress(group.describe()))
        kernel_at = {record.job.config.name: _taken_by_size(record, group) for record in records if record.job.probe}
        forms = [f"{self.args.mode}-graph", f"{self.args.mode}-eager"]
        rows = rows_of(analysis.samples, {}, configs, [group.dtype], ["sum"], ["plain"], forms)
        measured = sorted({row.size for row in rows})
        verdicts = []
        for size in measured:
            medians = {config.name: {row.mode: row.median(config.name) for row in rows if row.size == size}
                       for config in configs}
            took = {name: sizes_taken[size] for name, sizes_taken in kernel_at.items() if size in sizes_taken}
            verdicts.append(decide(size, medians, took, forms))
        return verdicts

    def verify(self, group, path, table, progress):
        """The sizes where the library, following the table, did not do what it says."""
        sizes = self.setup.sizes(group)
        config = _traced(Config("car-table", with_car=True, car_variables=(("NCCL_CAR_TABLE", path),)))
        records, _analysis = self.run(group, [Job(config, group.dtype, "sum", None, -1, True)],
                                      self.driver(group, sizes), progress(group.describe() + ", following the table"))
        taken = _taken_by_size(records[0], group)
        wrong = []
        for size in sizes:
            whole = _whole_message(size, group, self.setup)
            expected = winner_at(table["rows"], group.collective, group.ranks, group.links, group.family, whole)
            seen = taken.get(whole, NCCL)
            if expected is not None and expected != seen:
                wrong.append(f"{format_size(whole)}: the table says {expected}, the library ran {seen}")
        return wrong


def _whole_message(size, group, setup):
    """The bytes car_nccl_bench calls with for a requested size: whole elements per rank."""
    element = setup.type_bytes[group.dtype]
    per_rank = 1 if group.collective == ALL_REDUCE else group.ranks
    return size // (element * per_rank) * element * per_rank


class RunFailed(Exception):
    def __init__(self, group, failures):
        super().__init__(f"{group.describe()}: " + "; ".join(failures))


def execute(args):
    env = dict(os.environ)
    # What the user can fix here first (the library, the programs, the options), then the GPUs.
    setup = Setup(args, env)
    setup.chosen(args)
    ranks = _default_ranks(args)
    tuner = Tuner(args, setup)
    try:
        return _tune(args, ranks, setup, tuner)
    finally:
        tuner.cleanup()


def _cases(ranks, tuner):
    """{ranks: NVLINK or PCIE} for each world size the library takes here, saying which."""
    progress = Progress(len(ranks))
    cases = {}
    for world in ranks:
        links, why = tuner.case_of(world, progress)
        if links is None:
            print(f"tune: {world} ranks: the library takes no communicator here ({why}): nothing to measure")
            continue
        cases[world] = links
        print(f"tune: {world} ranks: {'PCIe (push kernels only)' if links == PCIE else 'NVLink'}")
    return cases


def _tune(args, ranks, setup, tuner):
    try:
        cases = _cases(ranks, tuner)
    except RunFailed as error:
        print(f"nccl-car tune: {error}; no table written", file=sys.stderr)
        return EXIT_FAILED
    groups = setup.groups(args, cases)
    if not groups:
        raise UsageError("nothing to measure: the library takes none of the collectives asked for here under these "
                         "settings")
    runs = sum(len(tuner.jobs(group)[1]) + (0 if args.no_verify else 1) for group in groups)
    print(f"tune: {len(groups)} groups ({', '.join(map(str, cases))} ranks{', on GPU 0' if args.one_gpu else ''}), "
          f"{runs} runs of car_nccl_bench in the {args.mode} mode, about {runs * SECONDS_PER_RUN / 60:.0f} min; "
          f"order seed {tuner.seed}")
    progress = Progress(runs)
    rows, started = [], time.monotonic()
    try:
        for group in groups:
            verdicts = tuner.measure(group, progress)
            rows += table_rows_of(group, verdicts)
    except RunFailed as error:
        print(f"nccl-car tune: {error}; no table written", file=sys.stderr)
        return EXIT_FAILED
    machine = tuner.fingerprint()
    path = os.path.abspath(args.output or machine["default_path"])
    if not path:
        raise UsageError("no cache folder (neither XDG_CACHE_HOME nor HOME is set): pass --output")
    notes = [f"written by nccl-car tune on {time.strftime('%Y-%m-%d %H:%M %Z')}: the {args.mode} mode, "
             f"{args.repeats} runs per configuration, {args.samples} samples each, order seed {tuner.seed}",
             f"NCCL {tuner.nccl_version}, every kernel of ours forced in turn against NCCL's default configuration"]
    if any(group.links == PCIE for group in groups):
        notes.append("over PCIe: the push kernels only; the all-gather's and reduce-scatter's given every size by a "
                     "table of tune's own while timed; what no pcie row gives ours goes to NCCL (untuned)")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".new", "w") as out:
        out.write(table_text(machine["fingerprint"], machine["description"], notes, rows))
    table = setup.query.table(setup.env, path + ".new", machine["fingerprint"])
    if not table["usable"]:
        print(f"nccl-car tune: the library would not follow the table it was given: {table['why']}", file=sys.stderr)
        return EXIT_FAILED
    os.replace(path + ".new", path)
    table["path"] = path
    print(f"table: {path} ({len(table['rows'])} rows, digest {table['digest']}, {(time.monotonic() - started) / 60:.1f} "
          "min)")
    _print_summary(rows)
    if args.no_verify:
        return EXIT_OK
    try:
        problems = [f"{group.describe()}: {problem}" for group in groups
                    for problem in tuner.verify(group, path, table, progress)]
    except RunFailed as error:
        print(f"nccl-car tune: checking the table: {error}", file=sys.stderr)
        return EXIT_FAILED
    if problems:
        print("the library does not follow the table:\n  " + "\n  ".join(problems))
        return EXIT_FAILED
    print(f"the library follows the table at every size measured ({len(groups)} groups)")
    return EXIT_OK


def _print_summary(rows):
    for row in rows:
        label = f"{row.group.describe()}: {format_size(row.low)} to {format_size(row.high)}"
        if row.winner == NCCL:
            print(f"  {label}: NCCL")
        else:
            ratios = [v.ratio for v in row.verdicts]
            print(f"  {label}: {row.winner}, {min(ratios):.2f}x to {max(ratios):.2f}x of NCCL's time")
