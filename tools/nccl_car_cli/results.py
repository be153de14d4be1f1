"""From many all_reduce_perf runs to one comparison per (dtype, mode, size): medians of
the NCCL-only runs against medians of the runs with nccl-car."""

import statistics
from collections import defaultdict
from dataclasses import dataclass

from .units import short_size


@dataclass
class Comparison:
    dtype: str
    mode: str
    size: int
    nccl_us: float | None        # median; None when no run produced this size
    car_us: float | None
    nccl_busbw: float | None
    car_busbw: float | None
    nccl_wrong: int | None       # summed over the runs; None when never checked (N/A)
    car_wrong: int | None
    nccl_runs: int
    car_runs: int

    @property
    def speedup(self):
        """NCCL time over nccl-car time: above 1 means nccl-car is faster."""
        if self.nccl_us is None or not self.car_us:
            return None
        return self.nccl_us / self.car_us


class Samples:
    """Timings collected per (dtype, mode, size, with nccl-car or not)."""

    def __init__(self):
        self._timings = defaultdict(list)

    def add(self, dtype, mode, with_car, output, in_place):
        for row in output.rows:
            self._timings[(dtype, mode, row.size, with_car)].append(row.timing(in_place))

    def compare(self, dtypes, modes):
        """One Comparison per size seen, in the order of dtypes, then modes, then size."""
        rows = []
        for dtype in dtypes:
            for mode in modes:
                sizes = sorted({size for (d, m, size, _with) in self._timings if (d, m) == (dtype, mode)})
                for size in sizes:
                    nccl = self._timings.get((dtype, mode, size, False), [])
                    car = self._timings.get((dtype, mode, size, True), [])
                    rows.append(Comparison(dtype, mode, size, _median(t.time_us for t in nccl),
                                           _median(t.time_us for t in car),
                                           _median(t.busbw for t in nccl), _median(t.busbw for t in car),
                                           _wrong_total(nccl), _wrong_total(car), len(nccl), len(car)))
        return rows


def _median(values):
    values = list(values)
    return statistics.median(values) if values else None


def _wrong_total(timings):
    checked = [t.wrong for t in timings if t.wrong is not None]
    return sum(checked) if checked else None


def any_wrong(comparisons):
    return any(c.nccl_wrong or c.car_wrong for c in comparisons)


def _cell(value, spec):
    if value is None:
        return "-"
    return format(value, spec)


def format_table(comparisons):
    header = (f"{'dtype':<9} {'mode':<6} {'size':>6} {'NCCL us':>10} {'nccl-car us':>12} "
              f"{'speedup':>8} {'#wrong NCCL':>12} {'#wrong nccl-car':>16}")
    lines = [header, "-" * len(header)]
    for c in comparisons:
        speedup = "-" if c.speedup is None else f"{c.speedup:.2f}x"
        wrong_nccl = "N/A" if c.nccl_wrong is None else str(c.nccl_wrong)
        wrong_car = "N/A" if c.car_wrong is None else str(c.car_wrong)
        lines.append(f"{c.dtype:<9} {c.mode:<6} {short_size(c.size):>6} {_cell(c.nccl_us, '.2f'):>10} "
                     f"{_cell(c.car_us, '.2f'):>12} {speedup:>8} {wrong_nccl:>12} {wrong_car:>16}")
    return "\n".join(lines)
