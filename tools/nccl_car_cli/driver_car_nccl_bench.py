"""bench's default driver: our own program, build/tests/car_nccl_bench (source
tests/bench/nccl_bench.cc). One run per configuration, dtype and op measures every size eager,
replayed from a CUDA graph, and the host time to issue one eager call. It takes the library's
type names (--type bf16, fp8e4m3, ...) and the op (--op sum, ...).

Its output: '#' comment lines, then CSV, each time the largest over ranks:
    bytes,eager_us,graph_us,host_us
It checks every size exactly before timing it; a size that fails gets a comment line
    # wrong: 4096 bytes, 12 element(s) differ on 1 rank(s)
and the program stops there with a non-zero exit status."""

import os
import re

from .bench_types import LIBRARY_NAMES
from .results import Sample

NAME = "car_nccl_bench"
MODES = ("eager", "graph", "host")   # host: the time to issue one eager call
_WRONG = re.compile(r"#\s*wrong:\s*(\d+) bytes, (\d+) element")


class CarNcclBench:
    name = NAME
    modes_per_run = False   # one run measures every mode

    def __init__(self, program, gpus, min_bytes, max_bytes, extra_args):
        self.arguments = [program, "--gpus", str(gpus), "--min-bytes", str(min_bytes),
                          "--max-bytes", str(max_bytes)]
        self.extra_args = extra_args

    def command(self, job, changes):
        """(argv, environment changes) of one run."""
        symmetric = ["--symmetric"] if job.config.symmetric else []
        return (self.arguments + ["--type", LIBRARY_NAMES[job.dtype], "--op", job.op] + symmetric
                + self.extra_args, changes)


def parse(job, stdout, in_place=False):
    """(samples, problem or None). `in_place` is nccl-tests' alone: our program has none."""
    samples, problems = [], []
    for line in stdout.splitlines():
        line = line.strip()
        wrong = _WRONG.match(line)
        if wrong:
            size, count = int(wrong.group(1)), int(wrong.group(2))
            samples.append(Sample(job.dtype, job.op, "eager", size, job.config.name, None, count))
            problems.append(f"wrong result at {size} bytes ({count} element(s))")
            continue
        fields = line.split(",")
        if line.startswith("#") or len(fields) != 1 + len(MODES) or not fields[0].isdigit():
            continue  # comments, the CSV header, NCCL's own log lines
        try:
            times = [float(field) for field in fields[1:]]
        except ValueError:
            continue
        # Printed only once every rank passed the check: nothing wrong at this size.
        samples.extend(Sample(job.dtype, job.op, mode, int(fields[0]), job.config.name, time, 0)
                       for mode, time in zip(MODES, times))
    if not samples:
        problems.append("printed no result rows")
    return samples, "; ".join(problems) or None


def default_program(library):
    """The program of the build the library is in: <build>/tests/car_nccl_bench for
    <build>/shim/libnccl-car.so, as scripts/build.sh lays them out."""
    return os.path.join(os.path.dirname(os.path.dirname(library)), "tests", NAME)
