"""Writes bench's rows as CSV: one row per (dtype, op, mode, size) with every configuration's
median, NCCL's best and nccl-car's ratios; empty cells for values no run produced."""

import csv

from .bench_configs import CAR

LEADING = ("dtype", "op", "mode", "place", "size_bytes")
SUMMARY = ("nccl_best_us", "nccl_best_config", "car_over_nccl_best", "car_over_nccl")


def fields(configs):
    names = [config.name for config in configs]
    return (LEADING + tuple(f"{name}_us" for name in names) + SUMMARY
            + tuple(f"{name}_wrong" for name in names) + tuple(f"{name}_runs" for name in names))


def _value(value):
    if value is None:
        return ""
    return f"{value:.6g}" if isinstance(value, float) else value


def write_csv(path, rows, configs, place):
    names = [config.name for config in configs]
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(fields(configs))
        for row in rows:
            best_name, best_us = row.best
            values = ([row.dtype, row.op, row.mode, place, row.size] + [row.medians[name] for name in names]
                      + [best_us, best_name, row.over_best(CAR.name), row.over_nccl(CAR.name)]
                      + [row.wrong[name] for name in names] + [row.runs[name] for name in names])
            writer.writerow([_value(value) for value in values])
