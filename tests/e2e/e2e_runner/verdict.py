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


# The forward reasons a run that claims acceleration may show (plugin/policy.cc names them):
# sizes above the library's limit belong to NCCL; a call of count 0 has nothing to reduce; an
# op made by ncclRedOpCreatePreMulSum has no kernel of ours; a nonblocking communicator's first
# all-reduce inside a group comes before its set-up; a communicator of one rank is not ours.
TOO_LARGE = "too-large"
EMPTY = "empty"
OP = "op"
NOT_READY = "comm-not-ready"
INELIGIBLE = "ineligible-comm"
# How the library names a communicator it refuses for having one rank (shim/handshake).
ONE_RANK = re.compile(r"^1 ranks \(")


def accelerated(seen, ranks, allowed=(TOO_LARGE,), most=None):
    """What every verdict that claims acceleration requires of the library's lines of a run
    (`seen`, a LogTally): at least `ranks` communicator ranks eligible and as many released,
    calls taken by our kernels, and no call forwarded for a reason outside `allowed`, nor more
    than most[reason] calls for a reason `most` bounds. Returns the (description, holds)
    conditions and the unexpected forwards by reason, for the notes."""
    most = most or {}
    unexpected = forwarded_except(seen, allowed)
    over = {reason: count for reason, count in seen.forward_reasons.items()
            if reason in most and count > most[reason]}
    conditions = [(f"{ranks} ranks eligible", seen.eligible >= ranks),
                  (f"{ranks} ranks released", seen.releases >= ranks),
                  ("calls taken", seen.taken_calls > 0),
                  (f"no call forwarded but {' or '.join(allowed)}", not unexpected)]
    conditions += [(f"at most {most[reason]} forwarded as {reason}", False) for reason in sorted(over)]
    return conditions, {**unexpected, **over}


# `kernels` below: the library's kernels by the collective each serves ({collective: names}),
# as its released: lines name them; read from its table (kernels/algorithms.h, kAlgorithms:
# each kernel serves one collective) through the query program (context.kernels).


def kernels_text(kernels, collective):
    """"1stage/2stage/1shot/2shot": `collective`'s kernels, as the verdicts name them."""
    return "/".join(kernels[collective])


def taken_by(seen, kernels, collective):
    """The calls the released: lines of `seen` (a LogTally) count as taken by `collective`'s
    kernels: a run's calls taken are its calls of that collective only where each kernel
    serves one."""
    return sum(seen.taken[kernel] for kernel in kernels[collective])


def took_only(seen, kernels, collective):
    """What a run of a program that calls one collective only (nccl-tests' *_perf) requires
    of the kernels that took its calls: `collective`'s took some, and no other kernel took
    any (a kernel of another collective, or one the library does not name, counting calls it
    did not take). Returns the (description, holds) conditions and the others' counts."""
    others = {kernel: count for kernel, count in seen.taken.items()
              if count and kernel not in kernels[collective]}
    mine = taken_by(seen, kernels, collective)
    return [(f"{collective} calls taken by {kernels_text(kernels, collective)}", mine > 0),
            ("no call taken by a kernel of another collective", not others)], others


def rank_tally(texts, rank, ranks):
    """The library's lines of every text about communicator rank `rank` of `ranks` (its setup:
    and released: lines), added up: for logs that several ranks share."""
    return tally(*lines_matching(texts, rf"\brank {rank}/{ranks} "))


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
