"""The order of bench's runs: every configuration once per repeat, in the same order each
repeat (nccl, nccl-R2, ..., car, ...), so that slow drift (clocks, other jobs) hits all
configurations alike; dtypes, then ops, then modes outside that."""

from dataclasses import dataclass

from .bench_configs import Config


@dataclass(frozen=True)
class Job:
    config: Config
    dtype: str         # nccl-tests' name: half, bfloat16, float, int8, f8e4m3, ...
    op: str            # sum, prod, min, max or avg
    mode: str | None   # eager or graph; None when one run measures every mode
    repeat: int        # from 0

    def describe(self, repeats):
        what = " ".join(part for part in (self.dtype, self.op, self.mode, self.config.name) if part)
        return f"{what}, repeat {self.repeat + 1}/{repeats}"

    @property
    def stem(self):
        """Where --save puts this run's output: <dtype>-<op>[-<mode>]/<config>.<repeat>, repeats
        from 1."""
        folder = "-".join(part for part in (self.dtype, self.op, self.mode) if part)
        return f"{folder}/{self.config.name}.{self.repeat + 1}"


def plan_jobs(configs, dtypes, ops, modes, repeats):
    """`modes` is None for a program whose one run measures every mode."""
    return [Job(config, dtype, op, mode, repeat)
            for dtype in dtypes for op in ops for mode in (modes or [None])
            for repeat in range(repeats) for config in configs]
