"""bench's other driver: nccl-tests' all_reduce_perf (--all-reduce-perf PATH). One run per
configuration, dtype, op and mode (-d, -o); -c 1 so that nccl-tests checks every result; -R 2
registers the buffers as NCCL symmetric windows. all_reduce_perf measures float instead of a
type it does not know (one built without fp8, say): rows of another type or op fail the run."""

from .nccl_tests import parse_output
from .results import Sample

NAME = "all_reduce_perf"


class AllReducePerf:
    name = NAME
    modes_per_run = True   # -G N or not: one run per mode

    def __init__(self, perf, gpus, launcher, min_bytes, max_bytes, graph_iters, extra_args,
                 launcher_preload):
        self.launcher = launcher or []
        self.arguments = [perf, "-b", str(min_bytes), "-e", str(max_bytes), "-f", "2",
                          "-g", str(1 if self.launcher else gpus), "-c", "1"]
        self.graph_iters = graph_iters
        self.extra_args = extra_args
        self.launcher_preload = launcher_preload   # LD_PRELOAD of the launcher itself

    def command(self, job, changes):
        """(argv, environment changes) of one run."""
        graph = str(self.graph_iters) if job.mode == "graph" else "0"
        registration = ["-R", "2"] if job.config.symmetric else []
        perf = self.arguments + ["-d", job.dtype, "-o", job.op, "-G", graph] + registration + self.extra_args
        if not self.launcher:
            return perf, changes
        # The ranks get the variables through `env`, which also reaches ranks on other hosts;
        # the launcher itself is never preloaded.
        removals = [word for name, value in changes.items() if value is None for word in ("-u", name)]
        assignments = [f"{name}={value}" for name, value in changes.items() if value is not None]
        return (self.launcher + ["env"] + removals + assignments + perf,
                dict(changes, LD_PRELOAD=self.launcher_preload or None))


def parse(job, stdout, in_place=False):
    """(samples, problem or None), from the out-of-place columns unless `in_place`."""
    output = parse_output(stdout)
    others = sorted({f"{row.dtype} {row.redop}" for row in output.rows} - {f"{job.dtype} {job.op}"})
    if others:
        return [], (f"measured {', '.join(others)} instead of {job.dtype} {job.op} (all_reduce_perf "
                    "falls back to float for a type it does not know, to sum for an op)")
    samples = [Sample(job.dtype, job.op, job.mode, row.size, job.config.name, row.timing(in_place).time_us,
                      row.timing(in_place).wrong) for row in output.rows]
    if not output.rows:
        return samples, "printed no result table"
    if output.bounds_ok is False:
        return samples, f"{output.out_of_bounds} out-of-bounds values"
    return samples, None
