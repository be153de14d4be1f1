"""The order of bench's runs: every configuration once per repeat, in the same order each
repeat (nccl, nccl-R2, ..., car, ...), so that slow drift (clocks, other jobs) hits all
configurations alike."""

from dataclasses import dataclass

from .bench_configs import Config


@dataclass(frozen=True)
class Job:
    config: Config
    dtype: str         # nccl-tests' name: half, bfloat16, float
    mode: str | None   # eager or graph; None when one run measures every mode
    repeat: int        # from 0

    def describe(self, repeats):
        what = " ".join(part for part in (self.dtype, self.mode, self.config.name) if part)
        return f"{what}, repeat {self.repeat + 1}/{repeats}"

    @property
    def stem(self):
        """Where --save puts this run's output: <folder>/<config>.<repeat>, repeats from 1."""
        folder = self.dtype if self.mode is None else f"{self.dtype}-{self.mode}"
        return f"{folder}/{self.config.name}.{self.repeat + 1}"


def plan_jobs(configs, dtypes, modes, repeats):
    """`modes` is None for a program whose one run measures every mode."""
    return [Job(config, dtype, mode, repeat)
            for dtype in dtypes for mode in (modes or [None])
            for repeat in range(repeats) for config in configs]
