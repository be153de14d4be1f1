"""A run's verdict, and the few ways the verdicts read logs: the library's lines through the
command-line tool's own parser (tools/nccl_car_cli/logparse.py), other programs' lines by
the text they print."""

import re
from dataclasses import dataclass, field

from . import tools_path  # noqa: F401  (puts tools/ on sys.path)
from nccl_car_cli.logparse import LogTally  # noqa: E402

PASS, FAIL, SKIPPED = "PASS", "FAIL", "SKIPPED"


@dataclass
class Verdict:
    status: str
    detail: str                                 # one line: what was seen
    notes: list = field(default_factory=list)   # lines from the logs worth showing

    @property
    def passed(self):
        return self.status == PASS


def judged(conditions, detail, notes=()):
    """PASS when every (description, holds) pair holds; a FAIL names those that did not."""
    unmet = [description for description, holds in conditions if not holds]
    if unmet:
        detail = f"{detail}; not met: {', '.join(unmet)}"
    return Verdict(FAIL if unmet else PASS, detail, list(notes))


def tally(*texts):
    """The library's log lines of every text, added up."""
    result = LogTally()
    for text in texts:
        for line in text.splitlines():
            result.feed(line)
    return result


def lines_with(texts, needle):
    """Every line of the texts that contains `needle`."""
    return [line for text in texts for line in text.splitlines() if needle in line]


def lines_matching(texts, pattern, flags=0):
    """Every line of the texts in which the regular expression `pattern` is found."""
    compiled = re.compile(pattern, flags)
    return [line for text in texts for line in text.splitlines() if compiled.search(line)]


def forwarded_except(seen, allowed):
    """The calls the released: lines of `seen` (a LogTally) count as forwarded for a reason
    not in `allowed`, by reason; calls forwarded without a reason given count as such."""
    unexpected = {reason: count for reason, count in seen.forward_reasons.items() if reason not in allowed and count}
    unexplained = seen.forwarded - sum(seen.forward_reasons.values())
    if unexplained > 0:
        unexpected["no reason given"] = unexplained
    return unexpected


def counts(by_name):
    """`name=count` pairs, largest first, or "none"."""
    ordered = sorted(by_name.items(), key=lambda item: (-item[1], item[0]))
    return " ".join(f"{name}={count}" for name, count in ordered) or "none"


def all_zero(returncodes):
    return all(code == 0 for code in returncodes)


def codes(returncodes):
    return "/".join(str(code) for code in returncodes)
