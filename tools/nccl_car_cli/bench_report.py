"""bench's rows as text, CSV and a chart. The text: one table per dtype, op, workload and
mode, per size NCCL alone, NCCL's best with its spread over the runs, which configuration
that was and what NCCL chose there, ours (PDL on, then off, then any variant) with spread
and ratio to the best, the wrong elements and how the row was checked; then, in words, where
nccl-car is slower than NCCL's best. The CSV has every figure; the chart needs matplotlib (an
optional dependency) and is left out, saying so, without it."""

import csv
from itertools import groupby

from .bench_drivers import CHECKED_EVERY, CHECKED_NONE, CHECKED_ONCE, HOST_MODE
from .bench_results import not_checked, slower_than_best, without_car_time
from .bench_runs import CAR
from .units import short_size

MODE_TITLES = {
    "model-graph": "model-like step from a CUDA graph, per all-reduce (step minus the step without them, "
                   "over the layers)",
    "model-eager": "model-like step, eager, per all-reduce",
    "isolated-graph": "isolated calls (a plain kernel writes each input) from a CUDA graph, per call",
    "isolated-eager": "isolated calls, eager, per call",
    HOST_MODE: "host time to issue one eager call (isolated calls)",
    "chain-graph": "back-to-back calls from a CUDA graph, per call (flatters early launch)",
    "chain-eager": "back-to-back calls, eager, per call",
}
WORKLOAD_TITLES = {"plain": "out of place, one stream", "in-place": "in place", "two-streams": "on a second stream",
                   "after-large": "each after a large call"}
CHECK_WORDS = {CHECKED_EVERY: "every", CHECKED_ONCE: "once", CHECKED_NONE: "NO"}


def _number(value, spec=".2f"):
    return "-" if value is None else format(value, spec)


def _spread(figure):
    return "-" if figure is None else f"{figure.low:.2f}-{figure.high:.2f}"


def _car_names(configs):
    return [config.name for config in configs if config.with_car]


def _short(name):
    return "nccl-car" if name == CAR.name else name


def _aligned(table):
    widths = [max(len(row[column]) for row in table) for column in range(len(table[0]))]
    lines = ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in table]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def _section(rows, car_names, table_winners):
    header = ["size", "NCCL", "NCCL best", "spread", "best is", "NCCL chose"]
    for name in car_names:
        header += [_short(name), "spread", "/best"]
    header += (["table"] if table_winners else []) + ["#wrong", "checked"]
    table = [header]
    for row in rows:
        best_name, best_us = row.best
        cells = [short_size(row.size), _number(row.median("nccl")), _number(best_us),
                 _spread(row.figures.get(best_name)), best_name or "-", row.best_choice or "-"]
        for name in car_names:
            cells += [_number(row.median(name)), _spread(row.figures.get(name)), _number(row.over_best(name))]
        if table_winners:
            cells.append(table_winners[(row.dtype, row.size)])
        cells += [str(row.wrong_total(row.wrong)) if row.wrong_total(row.wrong) is not None else "N/A",
                  CHECK_WORDS[row.checked]]
        table.append(cells)
    return _aligned(table)


def format_tables(rows, configs, repeats, table_winners=None):
    """`table_winners`: {(dtype, size): what the choice table the library followed gives that
    size (a kernel, "nccl", or "built-in" where no row covers it)}, a column; None: no table."""
    car_names = _car_names(configs)
    lines = []
    for _series, group in groupby(rows, key=lambda row: row.series):
        group = list(group)
        first = group[0]
        lines += ["", f"{first.dtype} {first.op}, {first.workload} ({WORKLOAD_TITLES.get(first.workload, '')}), "
                      f"{first.mode}: {MODE_TITLES.get(first.mode, first.mode)}; us, median and lowest-highest "
                      f"of {repeats} run(s)"]
        lines += _section(group, car_names, table_winners)
    return "\n".join(lines[1:])


def _places(rows, describe):
    parts = []
    for _series, group in groupby(rows, key=lambda row: row.series):
        group = list(group)
        parts.append(f"{group[0].label} " + ", ".join(describe(row) for row in group))
    return "; ".join(parts)


def verdict_lines(rows):
    """Where nccl-car is slower than NCCL's best, said plainly; then what was not timed or
    not checked."""
    compared = [row for row in rows if row.mode != HOST_MODE and row.over_best() is not None]
    slower, missing, unchecked = slower_than_best(rows), without_car_time(rows), not_checked(rows)
    lines = []
    if slower:
        lines.append("nccl-car is SLOWER than NCCL's best at: "
                     + _places(slower, lambda row: f"{short_size(row.size)} ({row.over_best():.3f}x, "
                                                   f"best {row.best[0]})"))
    elif compared:
        lines.append(f"nccl-car is not slower than NCCL's best at any of the {len(compared)} "
                     "row(s) measured with both")
    if missing:
        lines.append("no nccl-car time (its runs failed) at: " + _places(missing, lambda row: short_size(row.size)))
    if not compared and not missing:
        lines.append("no size was measured with both NCCL and nccl-car")
    if unchecked:
        lines.append("NOT CHECKED (their outputs were never compared): "
                     + _places(unchecked, lambda row: short_size(row.size)))
    return lines


LEADING = ("dtype", "op", "workload", "mode", "size_bytes")
PER_CONFIG = ("us", "low_us", "high_us", "runs", "wrong")


def fields(configs):
    names = [config.name for config in configs]
    ratios = tuple(f"{name}_over_nccl_best" for name in _car_names(configs))
    return (LEADING + tuple(f"{name}_{what}" for name in names for what in PER_CONFIG)
            + ("nccl_best_us", "nccl_best_config", "nccl_choice") + ratios + ("car_over_nccl", "checked"))


def _value(value):
    if value is None:
        return ""
    return f"{value:.6g}" if isinstance(value, float) else value


def write_csv(path, rows, configs):
    names = [config.name for config in configs]
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(fields(configs))
        for row in rows:
            best_name, best_us = row.best
            values = [row.dtype, row.op, row.workload, row.mode, row.size]
            for name in names:
                figure = row.figures.get(name)
                values += ([figure.median, figure.low, figure.high, figure.runs] if figure else [None, None, None, 0])
                values.append(row.wrong.get(name))
            values += [best_us, best_name, row.best_choice]
            values += [row.over_best(name) for name in _car_names(configs)]
            values += [row.over_nccl(CAR.name), row.checked]
            writer.writerow([_value(value) for value in values])


NO_MATPLOTLIB = "matplotlib is not installed"


def write_chart(path, rows, title):
    """Draws the chart to `path` (its format from the extension: .png, .svg, .pdf); returns
    None, or why it was not drawn."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError:
        return NO_MATPLOTLIB
    groups = [(key, list(group)) for key, group in groupby(sorted(rows, key=lambda r: r.series[:3]),
                                                           key=lambda r: r.series[:3])]
    if not groups:
        return "no rows to draw"
    figure, axes = pyplot.subplots(len(groups), 3, figsize=(16, 4.2 * len(groups)), squeeze=False)
    for index, ((dtype, op, workload), group) in enumerate(groups):
        time_axis, ratio_axis, host_axis = axes[index]
        for colour, (mode, mode_rows) in enumerate(groupby(sorted(group, key=lambda r: r.mode), key=lambda r: r.mode)):
            mode_rows = sorted(mode_rows, key=lambda r: r.size)
            sizes = [row.size for row in mode_rows]
            style = {"color": f"C{colour}"}
            if mode == HOST_MODE:
                host_axis.plot(sizes, [row.best[1] for row in mode_rows], "--", label="NCCL's best", **style)
                host_axis.plot(sizes, [row.median(CAR.name) for row in mode_rows], "-", label="nccl-car", **style)
                continue
            time_axis.plot(sizes, [row.best[1] for row in mode_rows], "--", **style)
            time_axis.plot(sizes, [row.median(CAR.name) for row in mode_rows], "-", label=mode, **style)
            ratio_axis.plot(sizes, [row.over_best() for row in mode_rows], "-", label=mode, **style)
        ratio_axis.axhline(1.0, color="black", linewidth=0.8)
        for axis, what in ((time_axis, "us per all-reduce (NCCL's best dashed)"), (ratio_axis, "nccl-car / NCCL's best"),
                           (host_axis, "host us per eager call")):
            axis.set_xscale("log", base=2)
            axis.set_title(f"{dtype} {op} {workload}: {what}", fontsize=9)
            axis.set_xlabel("bytes")
            if axis.lines:
                axis.legend(fontsize=7)
        time_axis.set_yscale("log")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
    return None
