"""What bench keeps of each run, and what it reads out of them: the timings, the failures and
the library's log lines. Live runs and runs loaded by --from go through the same reading,
so both print the same table."""

from collections import defaultdict
from dataclasses import dataclass, field

from .bench_configs import by_name
from .bench_plan import Job
from .logparse import LogTally


@dataclass
class RunRecord:
    job: Job
    command: list
    changes: dict          # environment variables the configuration set (None: removed)
    stdout: str
    stderr: str
    failure: str | None    # from the process: exit status, signal, timeout
    seconds: float


@dataclass
class Analysis:
    samples: list = field(default_factory=list)
    failures: list = field(default_factory=list)   # "<job>: <why>"
    logs: dict = field(default_factory=lambda: defaultdict(LogTally))   # configuration -> tally

    def nccl_runs_with_library(self):
        """The NCCL-only configurations whose runs printed library lines."""
        return [name for name, tally in self.logs.items()
                if not by_name(name).with_car and tally.library_lines]


def failure_of(record, parse, in_place):
    """(samples, failure or None): the process's failure and what its output shows."""
    samples, problem = parse(record.job, record.stdout, in_place)
    reasons = [reason for reason in (record.failure, problem) if reason]
    return samples, "; ".join(reasons) or None


def analyse(records, parse, repeats, in_place=False):
    analysis = Analysis()
    for record in records:
        samples, failure = failure_of(record, parse, in_place)
        analysis.samples.extend(samples)
        if failure:
            analysis.failures.append(f"{record.job.describe(repeats)}: {failure}")
        tally = analysis.logs[record.job.config.name]
        for line in record.stderr.splitlines():
            tally.feed(line)
    return analysis
