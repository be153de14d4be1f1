"""Parses the output of nccl-tests 2.x (all_reduce_perf and friends).

Data lines, after '#' header lines, have 13 columns:
    size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
        (out-of-place)                                      (in-place)
Times are in microseconds, bandwidths in GB/s; #wrong is N/A when run with -c 0, and
printed with %g, so that a million wrong elements or more read as 1e+06.
Any other line (NCCL's own log lines, banners) is not data and is skipped."""

import re
from dataclasses import dataclass, field

_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s+(\w+)")
_AVG_BUSBW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")


@dataclass
class Timing:
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None   # None: not checked (N/A)


@dataclass
class PerfRow:
    size: int
    count: int
    dtype: str
    redop: str
    root: int
    out_of_place: Timing
    in_place: Timing

    def timing(self, in_place):
        return self.in_place if in_place else self.out_of_place


@dataclass
class PerfOutput:
    rows: list = field(default_factory=list)
    out_of_bounds: int | None = None   # from "# Out of bounds values : N OK|FAILED"
    bounds_ok: bool | None = None
    avg_busbw: float | None = None


def _wrong(text):
    return None if text == "N/A" else int(float(text))


def _timing(time_us, algbw, busbw, wrong):
    return Timing(float(time_us), float(algbw), float(busbw), _wrong(wrong))


def _data_row(fields):
    if len(fields) != 13 or not fields[0].isdigit():
        return None
    try:
        return PerfRow(int(fields[0]), int(fields[1]), fields[2], fields[3], int(fields[4]),
                       _timing(*fields[5:9]), _timing(*fields[9:13]))
    except ValueError:
        return None


def parse_output(text):
    output = PerfOutput()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            bounds = _OUT_OF_BOUNDS.match(stripped)
            if bounds:
                output.out_of_bounds = int(bounds.group(1))
                output.bounds_ok = bounds.group(2) == "OK"
            busbw = _AVG_BUSBW.match(stripped)
            if busbw:
                output.avg_busbw = float(busbw.group(1))
            continue
        row = _data_row(stripped.split())
        if row is not None:
            output.rows.append(row)
    return output
