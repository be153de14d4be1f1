"""Reads cachegrind's summaries of hook_cost_bench (run-hook-cache-lines.sh) and prints what
the hook adds per call: instructions, and data lines missed in L1 on reads and on writes.

    cache_lines_added.py LABEL RANKS FOLDER

FOLDER holds SIDE-CALLS.txt (valgrind's stderr) for SIDE hook and direct, CALLS 500 and 1000;
every rank makes a warm-up and a timed run of CALLS calls.
"""
import re
import sys


def totals(path):
    text = open(path).read()

    def number(pattern):
        match = re.search(pattern, text)
        if match is None:
            sys.exit(f"{path}: no cachegrind summary ({pattern})")
        return [int(group.replace(",", "")) for group in match.groups()]

    (instructions,) = number(r"I\s+refs:\s+([\d,]+)")
    reads, writes = number(r"D1\s+misses:\s+[\d,]+\s+\(\s*([\d,]+) rd\s+\+\s+([\d,]+) wr")
    return instructions, reads, writes


def per_call(folder, side, ranks):
    fewer, more = (totals(f"{folder}/{side}-{calls}.txt") for calls in (500, 1000))
    calls = (1000 - 500) * 2 * ranks
    return [(b - a) / calls for a, b in zip(fewer, more)]


def main():
    label, ranks, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    hook, direct = (per_call(folder, side, ranks) for side in ("hook", "direct"))
    added = [h - d for h, d in zip(hook, direct)]
    print(f"{label}: hook less direct, per call: {added[0]:.0f} instructions, "
          f"{added[1]:.1f} lines missed on reads, {added[2]:.1f} on writes")


if __name__ == "__main__":
    main()
