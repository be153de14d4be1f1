"""A scenario: one named end-to-end check, one ctest test. Its body runs one or more
programs and yields a (run, Verdict) pair for each run, as the run ends."""

import fnmatch
from dataclasses import dataclass
from typing import Callable

from . import requirements


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str        # one line for --list
    needs: tuple        # keys of requirements.CHECKS, the GPU first
    limit: int          # seconds the whole scenario may take (ctest's TIMEOUT)
    body: Callable      # body(context) -> iterator of (run name, Verdict)

    @property
    def labels(self):
        return requirements.labels(self.needs)


SCENARIOS = {}  # name -> Scenario, in the order registered


def register(name, summary, needs, limit, body):
    if name in SCENARIOS:
        raise ValueError(f"scenario {name} registered twice")
    SCENARIOS[name] = Scenario(name, summary, tuple(needs), limit, body)


def select(patterns=(), label=None):
    """The scenarios whose name matches one of the shell-style patterns (all when none is
    given) and that carry `label` (any when None), in registration order."""
    chosen = []
    for scenario in SCENARIOS.values():
        if patterns and not any(fnmatch.fnmatchcase(scenario.name, pattern) for pattern in patterns):
            continue
        if label is not None and label not in scenario.labels:
            continue
        chosen.append(scenario)
    return chosen
