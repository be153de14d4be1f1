"""Draws the comparisons as a hand-written SVG: latency against size (log2 x, log10 y),
NCCL dashed and nccl-car solid, and speedup against size; one colour per dtype/mode."""

import math
from xml.sax.saxutils import escape

from .units import short_size

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_WIDTH, _HEIGHT = 1000, 470
_PANEL_WIDTH, _PANEL_HEIGHT, _PANEL_TOP = 360, 300, 60
_LATENCY_LEFT, _SPEEDUP_LEFT = 80, 560
_MAX_X_LABELS = 10


class _Canvas:
    def __init__(self):
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
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
                f'viewBox="0 0 {_WIDTH} {_HEIGHT}" font-family="sans-serif">\n'
                f'<title>{escape(title)}</title>\n'
                f'<rect width="{_WIDTH}" height="{_HEIGHT}" fill="#fff"/>\n'
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


def _series_keys(comparisons):
    keys = []
    for c in comparisons:
        if (c.dtype, c.mode) not in keys:
            keys.append((c.dtype, c.mode))
    return keys


def render_svg(comparisons, title):
    canvas = _Canvas()
    canvas.text(_WIDTH / 2, 24, title, size=16)
    sizes = sorted({c.size for c in comparisons})
    times = [t for c in comparisons for t in (c.nccl_us, c.car_us) if t]
    if not sizes or not times:
        canvas.text(_WIDTH / 2, _HEIGHT / 2, "no data: every run failed or printed no results")
        return canvas.svg(title)

    low = 10 ** math.floor(math.log10(min(times)))
    high = 10 ** math.ceil(math.log10(max(times)))
    high = high * 10 if high == low else high
    latency = _Panel(canvas, _LATENCY_LEFT, "latency (lower is better)", "time per all-reduce (us)",
                     low, high, True, sizes)
    for exponent in range(round(math.log10(low)), round(math.log10(high)) + 1):
        # "1e6" rather than "1e+06"; plain numbers while they stay short.
        label = f"{10.0 ** exponent:g}" if -3 <= exponent <= 4 else f"1e{exponent}"
        latency.y_tick(10.0 ** exponent, label)

    speedups = [c.speedup for c in comparisons if c.speedup is not None]
    top = max([1.5] + [s * 1.1 for s in speedups])
    step = _nice_step(top)
    top = math.ceil(top / step) * step
    speedup = _Panel(canvas, _SPEEDUP_LEFT, "speedup: NCCL time / nccl-car time", "speedup (x)",
                     0, top, False, sizes)
    for index in range(int(round(top / step)) + 1):
        speedup.y_tick(index * step, f"{index * step:g}")
    canvas.line(speedup.left, speedup.y(1), speedup.left + _PANEL_WIDTH, speedup.y(1),
                stroke="#555", dash="2,3")

    keys = _series_keys(comparisons)
    for index, key in enumerate(keys):
        colour = _PALETTE[index % len(_PALETTE)]
        rows = [c for c in comparisons if (c.dtype, c.mode) == key]
        latency.series([(c.size, c.nccl_us) for c in rows], colour, dash="6,4")
        latency.series([(c.size, c.car_us) for c in rows], colour)
        speedup.series([(c.size, c.speedup) for c in rows], colour)
        _legend_entry(canvas, index, f"{key[0]} {key[1]}", colour)
    legend_y = _HEIGHT - 22
    canvas.line(_LATENCY_LEFT, legend_y - 4, _LATENCY_LEFT + 30, legend_y - 4, stroke="#000", width=2)
    canvas.text(_LATENCY_LEFT + 36, legend_y, "nccl-car", anchor="start")
    canvas.line(_LATENCY_LEFT + 120, legend_y - 4, _LATENCY_LEFT + 150, legend_y - 4, stroke="#000",
                width=2, dash="6,4")
    canvas.text(_LATENCY_LEFT + 156, legend_y, "NCCL", anchor="start")
    return canvas.svg(title)


def _legend_entry(canvas, index, label, colour):
    # One row: there are at most 6 series (3 dtypes x 2 modes).
    x = _LATENCY_LEFT + index * 140
    y = _PANEL_TOP + _PANEL_HEIGHT + 68
    canvas.line(x, y - 4, x + 30, y - 4, stroke=colour, width=3)
    canvas.text(x + 36, y, label, anchor="start")


def write_svg(path, comparisons, title):
    with open(path, "w") as stream:
        stream.write(render_svg(comparisons, title))
