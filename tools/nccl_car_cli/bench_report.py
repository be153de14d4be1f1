"""bench's table as text: per dtype, op and mode, NCCL alone, NCCL's best and which
configuration it was, nccl-car and its ratio to the best; the host time per call against
NCCL alone; then, in words, where nccl-car is slower than NCCL's best."""

from itertools import groupby

from .bench_configs import CAR
from .results import HOST_MODE, NCCL_NAMES, slower_than_best, without_car_time
from .units import short_size

_WIDTH = 11


def _number(value, spec=".2f"):
    return "-" if value is None else format(value, spec)


def _count(value):
    return "N/A" if value is None else str(value)


def _line(cells, first_width=6):
    return f"{cells[0]:>{first_width}}" + "".join(f" {cell:>{_WIDTH}}" for cell in cells[1:])


def _car_names(configs):
    return [config.name for config in configs if config.with_car]


def _device_section(rows, car_names):
    header = ["size", "NCCL", "NCCL best", "best is"]
    for name in car_names:
        label = "nccl-car" if name == CAR.name else name
        header += [label, "car/best" if name == CAR.name else "/best"]
    header += ["#wrong NCCL", "#wrong car"]
    lines = [_line(header), "-" * len(_line(header))]
    for row in rows:
        best_name, best_us = row.best
        cells = [short_size(row.size), _number(row.medians.get("nccl")), _number(best_us), best_name or "-"]
        for name in car_names:
            cells += [_number(row.medians.get(name)), _number(row.over_best(name))]
        cells += [_count(row.wrong_total(NCCL_NAMES)), _count(row.wrong_total(car_names))]
        lines.append(_line(cells))
    return lines


def _host_section(rows, car_names):
    header = ["size", "NCCL"]
    for name in car_names:
        header += ["nccl-car" if name == CAR.name else name, "car/NCCL" if name == CAR.name else "/NCCL"]
    lines = [_line(header), "-" * len(_line(header))]
    for row in rows:
        cells = [short_size(row.size), _number(row.medians.get("nccl"))]
        for name in car_names:
            cells += [_number(row.medians.get(name)), _number(row.over_nccl(name))]
        lines.append(_line(cells))
    return lines


def format_tables(rows, configs):
    car_names = _car_names(configs)
    lines = []
    for label, group in groupby(rows, key=lambda row: row.label):
        group = list(group)
        if group[0].mode == HOST_MODE:
            lines += ["", f"{label}: time to issue one eager call (us)"] + _host_section(group, car_names)
        else:
            lines += ["", f"{label}: time per all-reduce (us)"] + _device_section(group, car_names)
    return "\n".join(lines[1:])


def _places(rows, describe):
    parts = []
    for label, group in groupby(rows, key=lambda row: row.label):
        parts.append(f"{label} " + ", ".join(describe(row) for row in group))
    return "; ".join(parts)


def verdict_lines(rows):
    """Where nccl-car is slower than NCCL's best, said plainly; every size says something."""
    compared = [row for row in rows if row.mode != HOST_MODE and row.over_best() is not None]
    slower, missing = slower_than_best(rows), without_car_time(rows)
    lines = []
    if slower:
        lines.append("nccl-car is SLOWER than NCCL's best at: "
                     + _places(slower, lambda row: f"{short_size(row.size)} ({row.over_best():.3f}x, "
                                                   f"best {row.best[0]})"))
    elif compared:
        lines.append(f"nccl-car is not slower than NCCL's best at any of the {len(compared)} "
                     "size(s) measured with both")
    if missing:
        lines.append("no nccl-car time (its runs failed) at: "
                     + _places(missing, lambda row: short_size(row.size)))
    if not compared and not missing:
        lines.append("no size was measured with both NCCL and nccl-car")
    return lines
