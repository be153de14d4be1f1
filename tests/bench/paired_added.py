#!/usr/bin/env python3
"""What car_nccl_bench --paired-direct measured: hook less pncclAllReduce at 16 MiB, per sample.

Usage: paired_added.py CSV...   (the samples of every file pooled)
Prints the median over samples, its quartiles, the medians by which call went first, the
medians through the hook and direct, and each row's wrong elements; exits non-zero when a
file has no paired rows.
"""
import csv
import statistics
import sys

SIZE = "16777216"


def paired_rows(name):
    with open(name) as lines:
        rows = {r["mode"]: r for r in csv.DictReader(line for line in lines if not line.startswith("#"))
                if r["bytes"] == SIZE and r["workload"] == "plain"}
    missing = [mode for mode in ("paired-hook", "paired-direct") if mode not in rows]
    if missing:
        sys.exit(f"{name}: no {', '.join(missing)} row at 16 MiB")
    return rows["paired-hook"], rows["paired-direct"]


def main(names):
    added, first, second, hooks, directs, wrong = [], [], [], [], [], []
    for name in names:
        hook_row, direct_row = paired_rows(name)
        hook, direct = ([float(v) for v in row["samples_us"].split(";")] for row in (hook_row, direct_row))
        run = [h - d for h, d in zip(hook, direct)]
        # Samples alternate which call goes first, the hook's first.
        added += run
        first += run[0::2]
        second += run[1::2]
        hooks += hook
        directs += direct
        wrong += [hook_row["wrong"], direct_row["wrong"]]
    low, _, high = statistics.quantiles(added, n=4) if len(added) > 1 else (added[0],) * 3
    print(f"{statistics.median(added):.3f} us over {len(added)} samples (quartiles {low:.3f} and {high:.3f}; "
          f"hook first {statistics.median(first):.3f}, NCCL's first {statistics.median(second) if second else 0:.3f}; "
          f"through the hook {statistics.median(hooks):.3f}, direct {statistics.median(directs):.3f}; "
          f"wrong {' '.join(wrong)})")


if __name__ == "__main__":
    main(sys.argv[1:])
