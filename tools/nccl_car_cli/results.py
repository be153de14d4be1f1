"""From many runs to one row per (dtype, op, mode, size): the median time of every
configuration, NCCL's best (the fastest NCCL configuration) and nccl-car against it."""

import itertools
import statistics
from collections import defaultdict
from dataclasses import dataclass

from .bench_configs import CAR, NCCL_CONFIGS

NCCL_NAMES = tuple(config.name for config in NCCL_CONFIGS)
# The time to issue a call, not to complete it: compared with NCCL alone, not with a best.
HOST_MODE = "host"


@dataclass(frozen=True)
class Sample:
    dtype: str
    op: str
    mode: str            # eager, graph or host
    size: int
    config: str
    time_us: float | None  # None: the size failed before it was timed
    wrong: int | None      # None: not checked (N/A)


@dataclass
class Row:
    dtype: str
    op: str
    mode: str
    size: int
    medians: dict   # configuration name -> median microseconds, None without a timing
    runs: dict      # configuration name -> timings taken
    wrong: dict     # configuration name -> wrong elements summed over runs, None if never checked

    @property
    def series(self):
        """What a table, a place in the verdict and a line of the chart are about."""
        return self.dtype, self.op, self.mode

    @property
    def label(self):
        return " ".join(self.series)   # "half sum eager"

    @property
    def best(self):
        """(NCCL configuration, its median): the fastest of NCCL's, the first on a tie;
        (None, None) when none has a time."""
        timed = [(self.medians[name], index, name) for index, name in enumerate(NCCL_NAMES)
                 if self.medians.get(name) is not None]
        if not timed:
            return None, None
        time, _index, name = min(timed)
        return name, time

    def over(self, config, baseline_us):
        """config's time over a baseline: below 1 means config is faster."""
        time = self.medians.get(config)
        if time is None or not baseline_us:
            return None
        return time / baseline_us

    def over_best(self, config=CAR.name):
        return self.over(config, self.best[1])

    def over_nccl(self, config=CAR.name):
        return self.over(config, self.medians.get("nccl"))

    def wrong_total(self, names):
        checked = [self.wrong[name] for name in names if self.wrong.get(name) is not None]
        return sum(checked) if checked else None


def rows_of(samples, configs, dtypes, ops, modes):
    """One Row per size seen, in the order of dtypes, then ops, then modes, then size."""
    times, wrongs = defaultdict(list), defaultdict(list)
    for sample in samples:
        key = (sample.dtype, sample.op, sample.mode, sample.size, sample.config)
        if sample.time_us is not None:
            times[key].append(sample.time_us)
        if sample.wrong is not None:
            wrongs[key].append(sample.wrong)
    names = [config.name for config in configs]
    rows = []
    for dtype, op, mode in itertools.product(dtypes, ops, modes):
        sizes = sorted({s.size for s in samples if (s.dtype, s.op, s.mode) == (dtype, op, mode)})
        for size in sizes:
            keys = {name: (dtype, op, mode, size, name) for name in names}
            rows.append(Row(dtype, op, mode, size,
                            {name: _median(times[key]) for name, key in keys.items()},
                            {name: len(times[key]) for name, key in keys.items()},
                            {name: sum(wrongs[key]) if wrongs[key] else None for name, key in keys.items()}))
    return rows


def _median(values):
    return statistics.median(values) if values else None


def any_wrong(rows):
    return any(row.wrong_total(row.wrong) for row in rows)


def slower_than_best(rows):
    """The eager and graph rows where nccl-car's median is above NCCL's best."""
    return [row for row in rows if row.mode != HOST_MODE and (row.over_best() or 0) > 1]


def without_car_time(rows):
    """The eager and graph rows where NCCL has a time and nccl-car none (its runs failed)."""
    return [row for row in rows if row.mode != HOST_MODE and row.best[1] is not None
            and row.medians.get(CAR.name) is None]
