"""From many runs to one row per (dtype, op, workload, mode, size): per configuration the
median over the runs and their spread (lowest and highest), NCCL's best (the NCCL
configuration with the lowest median; for the host time too, since NCCL_GRAPH_MIXING_SUPPORT=0
issues faster), what NCCL chose there, ours against it, and how the row was checked (the
weakest of its configurations: a row not checked says so)."""

import itertools
import statistics
from collections import defaultdict
from dataclasses import dataclass

from .bench_drivers import CHECKED_EVERY, CHECKED_NONE, CHECKED_ONCE, HOST_MODE
from .bench_runs import CAR, NCCL_NAMES

_CHECK_ORDER = (CHECKED_NONE, CHECKED_ONCE, CHECKED_EVERY)


@dataclass(frozen=True)
class Figure:
    median: float
    low: float
    high: float
    runs: int


@dataclass
class Row:
    dtype: str
    op: str
    workload: str
    mode: str
    size: int
    figures: dict   # configuration name -> Figure, None without a timing
    wrong: dict     # configuration name -> wrong elements summed over runs, None if never checked
    checked: str    # CHECKED_EVERY, CHECKED_ONCE or CHECKED_NONE
    choices: dict   # NCCL configuration -> what NCCL chose at this size (its tuning log)

    @property
    def series(self):
        """What a table, a place in the verdict and a line of the chart are about."""
        return self.dtype, self.op, self.workload, self.mode

    @property
    def label(self):
        return " ".join(self.series)   # "bfloat16 sum plain model-graph"

    def median(self, name):
        figure = self.figures.get(name)
        return figure.median if figure else None

    @property
    def best(self):
        """(NCCL configuration, its median): the fastest of NCCL's, the first on a tie;
        (None, None) when none has a time."""
        timed = [(self.median(name), index, name) for index, name in enumerate(NCCL_NAMES)
                 if self.median(name) is not None]
        if not timed:
            return None, None
        time, _index, name = min(timed)
        return name, time

    @property
    def best_choice(self):
        """What NCCL chose in its best configuration, None when unknown."""
        return self.choices.get(self.best[0])

    def over(self, config, baseline_us):
        """config's time over a baseline: below 1 means config is faster."""
        time = self.median(config)
        if time is None or not baseline_us:
            return None
        return time / baseline_us

    def over_best(self, config=CAR.name):
        return self.over(config, self.best[1])

    def over_nccl(self, config=CAR.name):
        return self.over(config, self.median("nccl"))

    def wrong_total(self, names):
        checked = [self.wrong[name] for name in names if self.wrong.get(name) is not None]
        return sum(checked) if checked else None


def rows_of(samples, choices, configs, dtypes, ops, workloads, modes):
    """One Row per size seen, in the order of dtypes, ops, workloads, modes, then size.
    `choices`: (dtype, op, config, size) -> what NCCL chose."""
    times, wrongs, checks = defaultdict(list), defaultdict(list), defaultdict(set)
    for sample in samples:
        key = (sample.dtype, sample.op, sample.workload, sample.mode, sample.size, sample.config)
        if sample.time_us is not None:
            times[key].append(sample.time_us)
        if sample.wrong is not None:
            wrongs[key].append(sample.wrong)
        checks[key[:5]].add(sample.checked)
    names = [config.name for config in configs]
    rows = []
    for series in itertools.product(dtypes, ops, workloads, modes):
        sizes = sorted({s.size for s in samples if (s.dtype, s.op, s.workload, s.mode) == series})
        for size in sizes:
            keys = {name: (*series, size, name) for name in names}
            seen = checks[(*series, size)]
            rows.append(Row(*series, size,
                            {name: _figure(times[key]) for name, key in keys.items()},
                            {name: sum(wrongs[key]) if wrongs[key] else None for name, key in keys.items()},
                            min(seen, key=_CHECK_ORDER.index) if seen else CHECKED_NONE,
                            {name: choices[(series[0], series[1], name, size)] for name in NCCL_NAMES
                             if (series[0], series[1], name, size) in choices}))
    return rows


def _figure(values):
    if not values:
        return None
    return Figure(statistics.median(values), min(values), max(values), len(values))


def any_wrong(rows):
    return any(row.wrong_total(row.wrong) for row in rows)


def slower_than_best(rows):
    """The timed rows (not the host time) where nccl-car's median is above NCCL's best."""
    return [row for row in rows if row.mode != HOST_MODE and (row.over_best() or 0) > 1]


def without_car_time(rows):
    """The rows where NCCL has a time and nccl-car none (its runs failed)."""
    return [row for row in rows if row.mode != HOST_MODE and row.best[1] is not None
            and row.median(CAR.name) is None]


def not_checked(rows):
    return [row for row in rows if row.checked == CHECKED_NONE]
