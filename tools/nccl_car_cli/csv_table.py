"""Writes the comparisons as CSV: one row per (dtype, mode, size), empty cells for
values no run produced."""

import csv

FIELDS = ("dtype", "mode", "place", "size_bytes", "nccl_us", "nccl_car_us", "speedup",
          "nccl_busbw_gbps", "nccl_car_busbw_gbps", "nccl_wrong", "nccl_car_wrong",
          "nccl_runs", "nccl_car_runs")


def _value(value):
    if value is None:
        return ""
    return f"{value:.6g}" if isinstance(value, float) else value


def write_csv(path, comparisons, place):
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(FIELDS)
        for c in comparisons:
            writer.writerow([_value(v) for v in (
                c.dtype, c.mode, place, c.size, c.nccl_us, c.car_us, c.speedup, c.nccl_busbw,
                c.car_busbw, c.nccl_wrong, c.car_wrong, c.nccl_runs, c.car_runs)])
