"""What bench runs, in which order, and what it keeps of each run.

Configurations: NCCL in four set-ups, the fastest of them at each size being the baseline
("NCCL's best", since users choose NCCL's settings too); ours with and without programmatic
dependent launch; variants of ours for experiments. Each says how its runs differ: buffers
registered as NCCL symmetric windows, and environment variables. Every run, NCCL's alone
too, has NCCL_CAR_DEBUG at INFO at least, so that a library loaded where it should not be
shows in the log.

The plan: per dtype and op (and form, for all_reduce_perf), first one probe run per NCCL
configuration with NCCL's tuning log on (what NCCL chose per size; nothing timed, so the
log costs the timed runs nothing), then every configuration once per repeat, in an order
shuffled anew for each repeat (seeded: the seed is printed and saved), so that drift and
the order itself hit all configurations alike.

Saved folders (--save DIR): every run's raw stdout and stderr as <dtype>-<op>[-<form>]/
<config>.<repeat>.out and .err (probes: <config>.probe.out), and bench.json saying what
was run, rewritten after every run so that an interrupted bench still leaves a folder that
--from can read. Folders of formats 1 and 2 (before the modes) still load.

`nccl-car tune` measures with the same pieces: a driver (bench_drivers.CarNcclBench with
modes ["model"] or ["isolated"], never "chain"), configurations (NCCL and car_forcing(kernel)
for each kernel), plan() and run_all(), then bench_results.rows_of()."""

import json
import os
import random
import signal
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field

from . import library_query, paths
from .bench_drivers import DEFAULT_OP, HOST_MODE, TUNING_LOG
from .errors import UsageError
from .logparse import LogTally


@dataclass(frozen=True)
class Config:
    name: str
    symmetric: bool = False         # nccl-tests -R 2, car_nccl_bench --symmetric
    graph_mixing_off: bool = False  # NCCL_GRAPH_MIXING_SUPPORT=0: NCCL skips the bookkeeping that
                                    # lets eager and graph-captured calls mix on one communicator
    with_car: bool = False          # libnccl-car.so preloaded
    car_variables: tuple = ()       # (name, value) pairs for the library


def car_forcing(kernel):
    """Ours with NCCL_CAR_ALGO=kernel."""
    return Config(f"car-{kernel}", with_car=True, car_variables=(("NCCL_CAR_ALGO", kernel),))


NCCL_CONFIGS = (
    Config("nccl"),
    Config("nccl-R2", symmetric=True),
    Config("nccl-gm0", graph_mixing_off=True),
    Config("nccl-R2-gm0", symmetric=True, graph_mixing_off=True),
)
NCCL_NAMES = tuple(config.name for config in NCCL_CONFIGS)
CAR = Config("car", with_car=True)
CAR_PDL0 = Config("car-pdl0", with_car=True, car_variables=(("NCCL_CAR_PDL", "0"),))
ALWAYS = NCCL_CONFIGS + (CAR, CAR_PDL0)
ALWAYS_NAMES = tuple(config.name for config in ALWAYS)
# The variants of ours: car-KERNEL for each kernel NCCL_CAR_ALGO can force, the all-reduce's,
# as the library names them (library_query.kernels_by_collective).
VARIANTS_FROM = "all-reduce"


def known_configs(kernels):
    """Every configuration bench knows: ALWAYS, then ours forcing each of `kernels` (the
    library's all-reduce kernels, in its order)."""
    return ALWAYS + tuple(car_forcing(kernel) for kernel in kernels)


def chosen(extra_names, kernels=tuple):
    """NCCL's four configurations, car and car-pdl0 always, then the variants named, in the
    order of known_configs whatever the order of the names. `kernels()` gives the library's
    all-reduce kernels, asked only when a name is not one of ALWAYS. A name that is none of
    them: ValueError, saying which are."""
    known = known_configs(kernels() if any(name not in ALWAYS_NAMES for name in extra_names) else ())
    names = [config.name for config in known]
    unknown = [name for name in extra_names if name not in names]
    if unknown:
        raise ValueError(f"unknown configuration '{unknown[0]}': expected some of {', '.join(names)}")
    wanted = set(extra_names)
    return [config for config in known if config in ALWAYS or config.name in wanted]


def variables(config, base_env, library, probe=False):
    """What a run of `config` sets (a value) or removes (None) in the caller's environment.
    NCCL_GRAPH_MIXING_SUPPORT is the configuration's, not the caller's, so that "nccl" is
    NCCL's default whatever the shell exported. NCCL_CAR_* set by the caller reach the runs
    with the library; the NCCL-only runs lose the library from LD_PRELOAD."""
    preload = base_env.get("LD_PRELOAD")
    changes = {
        "LD_PRELOAD": (paths.preload_with(preload, library) if config.with_car
                       else paths.preload_without(preload, library)) or None,
        "NCCL_GRAPH_MIXING_SUPPORT": "0" if config.graph_mixing_off else None,
        "NCCL_CAR_DEBUG": library_query.at_least_info(base_env.get("NCCL_CAR_DEBUG")),
    }
    if config.with_car:
        changes.update(config.car_variables)
    if probe:
        changes.update(TUNING_LOG)
    return changes


def with_nccl(base_env, nccl):
    """The caller's environment with `nccl` (a libnccl.so.2, or None: as it is) the NCCL every
    run loads: its folder first on LD_LIBRARY_PATH, and NCCL_CAR_NCCL_LIB for the library's
    runs, so that NCCL alone and NCCL under the library are the same NCCL."""
    env = dict(base_env)
    if nccl:
        path = os.path.abspath(nccl)
        env["LD_LIBRARY_PATH"] = paths.path_list_with(env.get("LD_LIBRARY_PATH"), os.path.dirname(path))
        env["NCCL_CAR_NCCL_LIB"] = path
    return env


def environment(base_env, changes):
    env = dict(base_env)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@dataclass(frozen=True)
class Job:
    config: Config
    dtype: str         # nccl-tests' name: half, bfloat16, float, int8, f8e4m3, ...
    op: str            # sum, prod, min, max or avg
    mode: str | None   # all_reduce_perf: chain-graph or chain-eager; None when one run measures every mode
    repeat: int        # from 0; a probe: -1
    probe: bool = False

    def describe(self, repeats):
        what = " ".join(part for part in (self.dtype, self.op, self.mode, self.config.name) if part)
        return f"{what}, probe" if self.probe else f"{what}, repeat {self.repeat + 1}/{repeats}"

    @property
    def stem(self):
        """Where --save puts this run's output."""
        folder = "-".join(part for part in (self.dtype, self.op, self.mode) if part)
        return f"{folder}/{self.config.name}." + ("probe" if self.probe else str(self.repeat + 1))


def plan(configs, dtypes, ops, forms, repeats, seed, probe):
    """`forms` is None for a program whose one run measures every mode. Probes (NCCL's
    configurations only) come first in each group; each repeat's order is a new shuffle."""
    shuffler = random.Random(seed)
    jobs = []
    for dtype in dtypes:
        for op in ops:
            for form in forms or [None]:
                if probe:
                    jobs += [Job(config, dtype, op, form, -1, True) for config in configs if not config.with_car]
                for repeat in range(repeats):
                    order = list(configs)
                    shuffler.shuffle(order)
                    jobs += [Job(config, dtype, op, form, repeat) for config in order]
    return jobs


@dataclass
class RunRecord:
    job: Job
    command: list
    changes: dict          # environment variables the configuration set (None: removed)
    stdout: str
    stderr: str
    failure: str | None    # from the process: exit status, signal, timeout
    seconds: float


OUTPUT_TAIL_LINES = 15


def run_once(command, env, timeout):
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


def tail(label, text):
    lines = text.rstrip("\n").splitlines()[-OUTPUT_TAIL_LINES:]
    return [f"    {label}: {line}" for line in lines]


@dataclass
class Analysis:
    samples: list = field(default_factory=list)
    choices: dict = field(default_factory=dict)    # (dtype, op, config, size) -> what NCCL chose
    failures: list = field(default_factory=list)   # "<job>: <why>"
    logs: dict = field(default_factory=lambda: defaultdict(LogTally))   # configuration -> tally
    configs: dict = field(default_factory=dict)    # configuration name -> Config

    def nccl_runs_with_library(self):
        """The NCCL-only configurations whose runs printed library lines."""
        return [name for name, tally in self.logs.items()
                if not self.configs[name].with_car and tally.library_lines]


def failure_of(record, driver):
    """(Output, failure or None): the process's failure and what its output shows."""
    output = driver.parse(record.job, record.stdout, record.stderr)
    reasons = [reason for reason in (record.failure, output.problem) if reason]
    return output, "; ".join(reasons) or None


def analyse(records, driver, repeats):
    analysis = Analysis()
    for record in records:
        output, failure = failure_of(record, driver)
        analysis.samples.extend(output.samples)
        job = record.job
        for size, choice in output.choices.items():
            analysis.choices[(job.dtype, job.op, job.config.name, size)] = choice
        if failure:
            analysis.failures.append(f"{job.describe(repeats)}: {failure}")
        analysis.configs[job.config.name] = job.config
        tally = analysis.logs[job.config.name]
        for line in record.stderr.splitlines():
            tally.feed(line)
    return analysis


MANIFEST = "bench.json"
FORMAT = 3
# What the report reads from the header (the rest is for people), per format: 1 had no ops,
# 1 and 2 no modes of today's kind (their eager, graph and host rows were back-to-back calls).
HEADER_KEYS = {1: ("driver", "configs", "dtypes", "modes", "repeats", "place", "runs"),
               2: ("driver", "configs", "dtypes", "ops", "modes", "repeats", "place", "runs"),
               3: ("driver", "configs", "dtypes", "ops", "modes", "workloads", "repeats", "runs")}
_LEGACY_MODES = {"eager": "chain-eager", "graph": "chain-graph", "host": HOST_MODE}


class SavedRuns:
    def __init__(self, folder, header):
        self.folder = folder
        self.header = dict(header, format=FORMAT)
        self.entries = []
        os.makedirs(folder, exist_ok=True)

    def add(self, record):
        files = {"stdout": record.job.stem + ".out", "stderr": record.job.stem + ".err"}
        os.makedirs(os.path.join(self.folder, os.path.dirname(record.job.stem)), exist_ok=True)
        for stream, name in files.items():
            with open(os.path.join(self.folder, name), "w") as out:
                out.write(getattr(record, stream))
        job = record.job
        self.entries.append(dict(files, config=job.config.name, dtype=job.dtype, op=job.op, mode=job.mode,
                                 repeat=job.repeat + 1, probe=job.probe, command=record.command,
                                 variables=record.changes, failure=record.failure, seconds=round(record.seconds, 3)))
        # Written aside, then renamed: a reader never sees half a file.
        path = os.path.join(self.folder, MANIFEST)
        with open(path + ".new", "w") as out:
            json.dump(dict(self.header, runs=self.entries), out, indent=1)
            out.write("\n")
        os.replace(path + ".new", path)


def _read(folder, name):
    try:
        with open(os.path.join(folder, name), errors="replace") as stream:
            return stream.read(), None
    except OSError as error:
        return "", f"saved output unreadable ({error.strerror}: {name})"


def _upgraded(manifest, version):
    """A header of format 1 or 2 in today's terms: sums (format 1), chain modes, the place as
    the workload."""
    if version == 1:
        manifest["ops"] = [DEFAULT_OP]
    if version < 3:
        manifest["modes"] = [_LEGACY_MODES[mode] for mode in manifest["modes"]]
        manifest["workloads"] = ["in-place" if manifest["place"] == "in-place" else "plain"]
        manifest["sizes"] = None
        manifest["seed"] = None
    return manifest


def load(folder, kernels=tuple):
    """(header, [Config] of its configurations, [RunRecord]) from a folder that --save wrote.
    `kernels()` gives the library's all-reduce kernels (known_configs), asked only when the
    folder names a variant of ours."""
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path) as stream:
            manifest = json.load(stream)
        if not isinstance(manifest, dict):
            raise TypeError("not a JSON object")
        version = manifest.get("format")
        if version not in HEADER_KEYS:
            raise UsageError(f"{path} is in format {version}, this bench reads "
                             f"{', '.join(map(str, HEADER_KEYS))}")
        missing = [key for key in HEADER_KEYS[version] if key not in manifest]
        if missing:
            raise KeyError(", ".join(missing))
        manifest = _upgraded(manifest, version)
        variants = any(name not in ALWAYS_NAMES for name in manifest["configs"])
        known = {config.name: config for config in known_configs(kernels() if variants else ())}
        configs = [known[name] for name in manifest["configs"]]   # one this bench does not know: KeyError
        records = []
        for entry in manifest["runs"]:
            op = DEFAULT_OP if version == 1 else entry["op"]
            mode = _LEGACY_MODES.get(entry["mode"]) if version < 3 and entry["mode"] else entry["mode"]
            probe = bool(entry.get("probe", False))
            job = Job(known[entry["config"]], entry["dtype"], op, mode, entry["repeat"] - 1, probe)
            stdout, stdout_problem = _read(folder, entry["stdout"])
            stderr, stderr_problem = _read(folder, entry["stderr"])
            failures = [f for f in (entry["failure"], stdout_problem, stderr_problem) if f]
            records.append(RunRecord(job, entry["command"], entry["variables"], stdout, stderr,
                                     "; ".join(failures) or None, entry["seconds"]))
    except OSError as error:
        raise UsageError(f"cannot read {path} ({error.strerror}): not a folder written by "
                         "nccl-car bench --save") from None
    except (ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{path} is not what nccl-car bench --save writes ({error!r})") from None
    return manifest, configs, records


def run_all(jobs, driver, base_env, library, timeout, progress, saved=None):
    """Runs the jobs in order; `progress(number, total, job, record, failure)` is called
    before (record None) and after each run. Returns the RunRecords."""
    records = []
    for number, job in enumerate(jobs, start=1):
        progress(number, len(jobs), job, None, None)
        changes = variables(job.config, base_env, library, probe=job.probe)
        command, local_changes = driver.launched(driver.command(job), changes)
        started = time.monotonic()
        stdout, stderr, failure = run_once(command, environment(base_env, local_changes), timeout)
        record = RunRecord(job, command, changes, stdout, stderr, failure, time.monotonic() - started)
        _output, failure = failure_of(record, driver)
        progress(number, len(jobs), job, record, failure)
        records.append(record)
        if saved:
            saved.add(record)
    return records
