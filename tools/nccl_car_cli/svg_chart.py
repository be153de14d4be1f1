"""Draws bench's rows as a hand-written SVG, one colour per dtype/op/mode, size on a log2 axis:
time per all-reduce (NCCL's best dashed, nccl-car solid), nccl-car's time over NCCL's best,
and, where the driver measures it, the host time per call (NCCL alone dashed)."""

import math
from xml.sax.saxutils import escape

from .bench_configs import CAR
from .results import HOST_MODE
from .units import short_size

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_HEIGHT = 470
_PANEL_WIDTH, _PANEL_HEIGHT, _PANEL_TOP = 360, 300, 60
_LEFT, _PANEL_STEP = 80, 480   # the first panel's left edge; from one panel to the next
_MAX_X_LABELS = 10
_LEGEND_TOP, _LEGEND_STEP, _LEGEND_LINE = _PANEL_TOP + _PANEL_HEIGHT + 68, 170, 18


class _Canvas:
    def __init__(self, width, height=_HEIGHT):
        self.width, self.height = width, height
        self.parts = []

    def line(self, x1, y1, x2, y2, stroke="#000", width=1, dash=None):
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                          f'stroke="{stroke}" stroke-width="{width}"{dashed}/>')

    def text(self, x, y, content, anchor="middle", size=12, rotate=None):
        turn = f' transform="rotate({rotate} {x:.1f} {y:.1f})"' if rotate else ""
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" '
                          f'text-anchor="{anchor}"{turn}>{escape(content)}</text>')

    def polyline(self, points, stroke, dash=None):
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(f'<polyline points="{coordinates}" fill="none" stroke="{stroke}" '
                          f'stroke-width="2"{dashed}/>')

    def svg(self, title):
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
                f'viewBox="0 0 {self.width} {self.height}" font-family="sans-serif">\n'
                f'<title>{escape(title)}</title>\n'
                f'<rect width="{self.width}" height="{self.height}" fill="#fff"/>\n'
                + "\n".join(self.parts) + "\n</svg>\n")


def _scale(value, low, high, start, length, log):
    """Pixel of `value` on an axis from `start` spanning `length` (negative: upwards)."""
    if log:
        value, low, high = math.log(value), math.log(low), math.log(high)
    if high == low:
        return start + length / 2
    return start + (value - low) / (high - low) * length


def _segments(points):
    """Splits at missing values: a gap is left open rather than bridged."""
    segment = []
    for x, y in points:
        if y is None:
            if segment:
                yield segment
            segment = []
        else:
            segment.append((x, y))
    if segment:
        yield segment


def _nice_step(top):
    for step in (0.25, 0.5, 1, 2, 5, 10, 20, 50):
        if top / step <= 8:
            return step
    return top / 8


class _Panel:
    def __init__(self, canvas, left, title, y_label, y_low, y_high, y_log, sizes):
        self.canvas, self.left, self.top = canvas, left, _PANEL_TOP
        self.y_low, self.y_high, self.y_log = y_low, y_high, y_log
        self.x_low, self.x_high = min(sizes), max(sizes)
        bottom = self.top + _PANEL_HEIGHT
        canvas.text(left + _PANEL_WIDTH / 2, self.top - 12, title, size=14)
        canvas.line(left, bottom, left + _PANEL_WIDTH, bottom)
        canvas.line(left, self.top, left, bottom)
        canvas.text(left + _PANEL_WIDTH / 2, bottom + 38, "message size (bytes)")
        canvas.text(left - 55, self.top + _PANEL_HEIGHT / 2, y_label, rotate=-90)
        every = max(1, math.ceil(len(sizes) / _MAX_X_LABELS))
        for index, size in enumerate(sizes):
            x = self.x(size)
            canvas.line(x, bottom, x, bottom + 4)
            if index % every == 0:
                canvas.text(x, bottom + 18, short_size(size), size=11)

    def x(self, size):
        return _scale(size, self.x_low, self.x_high, self.left, _PANEL_WIDTH, log=True)

    def y(self, value):
        return _scale(value, self.y_low, self.y_high, self.top + _PANEL_HEIGHT, -_PANEL_HEIGHT,
                      log=self.y_log)

    def y_tick(self, value, label, grid=True):
        y = self.y(value)
        if grid:
            self.canvas.line(self.left, y, self.left + _PANEL_WIDTH, y, stroke="#ddd")
        self.canvas.line(self.left - 4, y, self.left, y)
        self.canvas.text(self.left - 7, y + 4, label, anchor="end", size=11)

    def series(self, points, colour, dash=None):
        for segment in _segments((self.x(size), None if v is None else self.y(v)) for size, v in points):
            self.canvas.polyline(segment, colour, dash)


def _series_keys(rows):
    keys = []
    for row in rows:
        if row.series not in keys:
            keys.append(row.series)
    return keys


def _log_range(times):
    low = 10 ** math.floor(math.log10(min(times)))
    high = 10 ** math.ceil(math.log10(max(times)))
    return low, (high * 10 if high == low else high)


def _log_panel(canvas, left, title, times, sizes):
    low, high = _log_range(times)
    panel = _Panel(canvas, left, title, "microseconds", low, high, True, sizes)
    for exponent in range(round(math.log10(low)), round(math.log10(high)) + 1):
        # "1e6" rather than "1e+06"; plain numbers while they stay short.
        label = f"{10.0 ** exponent:g}" if -3 <= exponent <= 4 else f"1e{exponent}"
        panel.y_tick(10.0 ** exponent, label)
    return panel


def _ratio_panel(canvas, left, ratios, sizes):
    top = max([1.5] + [r * 1.1 for r in ratios])
    step = _nice_step(top)
    top = math.ceil(top / step) * step
    panel = _Panel(canvas, left, "nccl-car / NCCL's best (below 1: faster)", "time ratio", 0, top, False, sizes)
    for index in range(int(round(top / step)) + 1):
        panel.y_tick(index * step, f"{index * step:g}")
    canvas.line(panel.left, panel.y(1), panel.left + _PANEL_WIDTH, panel.y(1), stroke="#555", dash="2,3")
    return panel


def _times(rows, names):
    return [t for row in rows for t in (row.medians.get(name) for name in names) if t]


def render_svg(rows, title):
    device = [row for row in rows if row.mode != HOST_MODE]
    host = [row for row in rows if row.mode == HOST_MODE]
    device_times = [t for row in device for t in (row.best[1], row.medians.get(CAR.name)) if t]
    host_times = _times(host, ("nccl", CAR.name))
    width = _PANEL_STEP * (2 + bool(host_times))
    keys = _series_keys(rows)
    per_legend_row = (width - _LEFT) // _LEGEND_STEP
    legend_rows = max(1, math.ceil(len(keys) / per_legend_row))
    canvas = _Canvas(width, _HEIGHT + (legend_rows - 1) * _LEGEND_LINE)
    canvas.text(width / 2, 24, title, size=16)
    sizes = sorted({row.size for row in rows})
    if not sizes or not device_times:
        canvas.text(width / 2, canvas.height / 2, "no data: every run failed or printed no results")
        return canvas.svg(title)

    latency = _log_panel(canvas, _LEFT, "time per all-reduce (lower is better)", device_times, sizes)
    ratio = _ratio_panel(canvas, _LEFT + _PANEL_STEP,
                         [r for r in (row.over_best() for row in device) if r is not None], sizes)
    issue = (_log_panel(canvas, _LEFT + 2 * _PANEL_STEP, "host time to issue one eager call",
                        host_times, sizes) if host_times else None)
    for index, key in enumerate(keys):
        colour = _PALETTE[index % len(_PALETTE)]
        series = [row for row in rows if row.series == key]
        if series[0].mode == HOST_MODE:
            if issue is None:
                continue
            issue.series([(row.size, row.medians.get("nccl")) for row in series], colour, dash="6,4")
            issue.series([(row.size, row.medians.get(CAR.name)) for row in series], colour)
        else:
            latency.series([(row.size, row.best[1]) for row in series], colour, dash="6,4")
            latency.series([(row.size, row.medians.get(CAR.name)) for row in series], colour)
            ratio.series([(row.size, row.over_best()) for row in series], colour)
        line, column = divmod(index, per_legend_row)
        _legend_entry(canvas, _LEFT + column * _LEGEND_STEP, _LEGEND_TOP + line * _LEGEND_LINE, series[0].label,
                      colour)
    legend_y = canvas.height - 22
    canvas.line(_LEFT, legend_y - 4, _LEFT + 30, legend_y - 4, stroke="#000", width=2)
    canvas.text(_LEFT + 36, legend_y, "nccl-car", anchor="start")
    canvas.line(_LEFT + 120, legend_y - 4, _LEFT + 150, legend_y - 4, stroke="#000", width=2, dash="6,4")
    canvas.text(_LEFT + 156, legend_y, "NCCL's best (host: NCCL alone)", anchor="start")
    return canvas.svg(title)


def _legend_entry(canvas, x, y, label, colour):
    canvas.line(x, y - 4, x + 30, y - 4, stroke=colour, width=3)
    canvas.text(x + 36, y, label, anchor="start")


def write_svg(path, rows, title):
    with open(path, "w") as stream:
        stream.write(render_svg(rows, title))
