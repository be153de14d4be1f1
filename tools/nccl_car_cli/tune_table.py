"""From nccl-car tune's measurements to a choice table. The format is the library's
(plugin/choice_table.h); its parser, through `nccl_car_query table`, is the one reader, and
tune reads every table it writes back through it.

The rule: a size goes to a kernel of ours only where that kernel took the call (its TRACE
lines say so) and its median was below NCCL's in every form measured (graph and eager); of
those, the one whose worse ratio to NCCL is lowest. Anywhere else NCCL wins: "never slower
than NCCL" is the promise, so a tie goes to NCCL. Each measured size stands for the sizes
nearest to it on a log scale, and neighbouring sizes with one winner make one row."""

import math
from dataclasses import dataclass

from .units import format_size

NCCL = "nccl"
FORMAT_LINE = "nccl-car choice table 2"
ANY_FAMILY = "any"
# The two cases a communicator can be, as the library's setup: lines and the table's rows
# name them (plugin/choice_table.h, Links).
NVLINK, PCIE = "nvlink", "pcie"


@dataclass(frozen=True)
class Group:
    """What one set of runs measures: a collective at a world size, for one type family
    (ANY_FAMILY where every kernel of the collective moves bits unchanged), timed with one
    type of that family (nccl-tests' name), on a communicator of one case (NVLINK or PCIE, as
    the library's setup: line said)."""
    collective: str
    ranks: int
    family: str
    dtype: str
    links: str = NVLINK

    def describe(self):
        family = "every type" if self.family == ANY_FAMILY else f"{self.family} ({self.dtype})"
        over = " over PCIe" if self.links == PCIE else ""
        return f"{self.collective}, {self.ranks} ranks{over}, {family}"


@dataclass(frozen=True)
class Verdict:
    size: int            # the whole message, bytes
    winner: str          # a kernel's name, or NCCL
    ratio: float | None  # the winner's worse ratio to NCCL over the forms; None for NCCL
    nccl_us: dict        # form -> NCCL's median


def decide(size, medians, kernel_of, forms):
    """The Verdict at one size. medians: {config name: {form: median us}}, NCCL's under NCCL;
    kernel_of: {config name: the kernel that took this size in that configuration} (a
    configuration whose calls went to NCCL is absent). A form without a time for NCCL, or for
    a kernel, rules that kernel out."""
    nccl = medians.get(NCCL, {})
    best, best_ratio = NCCL, None
    for config, kernel in kernel_of.items():
        ratios = [medians.get(config, {}).get(form) / nccl[form]
                  if medians.get(config, {}).get(form) is not None and nccl.get(form) else None for form in forms]
        if not ratios or None in ratios:
            continue
        worse = max(ratios)
        if worse < 1 and (best_ratio is None or worse < best_ratio):
            best, best_ratio = kernel, worse
    return Verdict(size, best, best_ratio, {form: nccl.get(form) for form in forms})


def size_ranges(sizes):
    """[(from, to)] inclusive, one per measured size (ascending): each covers the sizes
    nearest to it on a log scale, the first from 0, the last up to itself."""
    bounds = [math.isqrt(low * high) for low, high in zip(sizes, sizes[1:])]
    return list(zip([0] + [bound + 1 for bound in bounds], bounds + [sizes[-1]]))


@dataclass
class TableRow:
    group: Group
    low: int
    high: int
    winner: str
    verdicts: list   # the measured sizes it stands for

    def line(self):
        group = self.group
        return f"{group.collective} {group.ranks} {group.links} {group.family} {self.low} {self.high} {self.winner}"

    def comment(self):
        """What was measured in the row's range, for people."""
        sizes = ", ".join(format_size(v.size) for v in self.verdicts)
        if self.winner == NCCL:
            return f"# {sizes}: no kernel of ours below NCCL in every form"
        ratios = ", ".join(f"{v.ratio:.2f}" for v in self.verdicts)
        return f"# {sizes}: {self.winner} at {ratios} of NCCL's time (the worse form)"


def rows_of(group, verdicts):
    """The table's rows for one group, from its verdicts in any order."""
    verdicts = sorted(verdicts, key=lambda v: v.size)
    rows = []
    for verdict, (low, high) in zip(verdicts, size_ranges([v.size for v in verdicts])):
        if rows and rows[-1].winner == verdict.winner:
            rows[-1].high = high
            rows[-1].verdicts.append(verdict)
        else:
            rows.append(TableRow(group, low, high, verdict.winner, [verdict]))
    return rows


def table_text(fingerprint, machine, notes, rows):
    """The file: the format line, the fingerprint, the machine, `notes` as comments, then
    every row after its comment."""
    lines = [FORMAT_LINE, f"fingerprint {fingerprint}", f"machine {machine}"]
    lines += [f"# {note}" for note in notes]
    for row in rows:
        lines += [row.comment(), row.line()]
    return "\n".join(lines) + "\n"


def winner_at(table_rows, collective, ranks, links, family, size):
    """The winner the table's rows (as `nccl_car_query table` lists them) give a message on a
    communicator of that case, None where no row covers it (the built-in rule; over PCIe,
    NCCL)."""
    for row in table_rows:
        if (row["collective"] == collective and row["ranks"] == ranks and row["links"] == links
                and row["family"] in (family, ANY_FAMILY) and row["from"] <= size <= row["to"]):
            return row["winner"]
    return None


def probe_table_text(fingerprint, collective, ranks, links, kernel, largest):
    """A table that gives `kernel` every size of `collective` up to `largest` on communicators
    of `ranks` ranks and that case: how tune makes the library run its kernel over PCIe, where
    no built-in size exists, for the timed runs."""
    return "\n".join([FORMAT_LINE, f"fingerprint {fingerprint}", "machine the machine being measured",
                      "# written by nccl-car tune for its own runs: every size to the kernel being measured",
                      f"{collective} {ranks} {links} {ANY_FAMILY} 0 {largest} {kernel}"]) + "\n"
