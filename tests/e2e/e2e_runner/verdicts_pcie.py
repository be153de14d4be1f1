"""Verdicts on the PCIe case's runs on the one-GPU rig (scenarios_pcie.py), from exit codes,
the library's lines (the tool's own parser) and the choice table tune wrote. Pure functions:
the runner's CPU tests feed them canned logs."""

import re

from .verdict import TOO_LARGE, all_zero, codes, counts, forwarded_except, judged, lines_with, tally
from nccl_car_cli.logparse import PCIE, taken_calls  # noqa: E402  (tools/ is on the path: verdict.py)
from nccl_car_cli.tune_table import NCCL, winner_at  # noqa: E402

UNTUNED = "untuned"
TUNED = "tuned"
# allreduce_e2e's summary line: its checks, and those of calls above the library's limit.
_CHECKS = re.compile(r"rank \d+/\d+: (?P<checks>\d+) checks \((?P<above>\d+) above \d+ bytes\), (?P<wrong>\d+) wrong")
# The library's type families (plugin/choice_table.h) of allreduce_e2e's types.
FAMILIES = {"fp16": "half", "bf16": "half", "fp32": "float"}


def _checks(logs):
    reports = [match for match in map(_CHECKS.search, lines_with(logs, " checks (")) if match]
    return reports, sum(int(m["checks"]) for m in reports), sum(int(m["above"]) for m in reports)


def untuned(ranks, returncodes, logs):
    """allreduce_e2e under the test topology `pcie`, no choice table: every rank's setup: line
    says the PCIe case is not eligible, untuned (naming nccl-car tune), with the links it found
    and no memory held; nothing taken, every call forwarded as untuned (those above the limit
    too: the communicator takes nothing at all), every sum exact."""
    seen = tally(*logs)
    reports, calls, _above = _checks(logs)
    others = forwarded_except(seen, (UNTUNED,))
    naming = [line for line in lines_with(logs, "setup: not eligible: pcie untuned (")
              if "): every call goes to NCCL (untuned) until `nccl-car tune` has measured" in line]
    holding = [line for line in lines_with(logs, "setup:") if " holds " in line]
    conditions = [("every rank exits 0 (every sum exact)", all_zero(returncodes)),
                  (f"{ranks} ranks report their checks", len(reports) == ranks),
                  (f"{ranks} ranks found the PCIe case, none eligible",
                   seen.links[PCIE] == ranks and seen.eligible == 0),
                  ("each says it is untuned, naming nccl-car tune", seen.pcie_untuned == ranks and len(naming) == ranks),
                  ("none holds memory for it", not holding),
                  (f"{ranks} ranks released", seen.releases == ranks),
                  ("no call taken", seen.taken_calls == 0),
                  (f"all {calls} calls forwarded as {UNTUNED}", seen.forward_reasons[UNTUNED] == calls),
                  ("no call forwarded for another reason", not others)]
    return judged(conditions, f"exit {codes(returncodes)}, {seen.links[PCIE]}/{ranks} ranks over PCIe "
                              f"({seen.pcie_untuned} untuned), {seen.taken_calls} calls taken, {seen.forwarded} "
                              f"forwarded ({counts(seen.forward_reasons)})", lines_with(logs[:1], "setup:"))


def tuned_table(returncode, output, table):
    """nccl-car tune --one-gpu under the test topology: it found the PCIe case, wrote a table
    the library reads back and follows, every row of the PCIe case, and at least one size
    went to a kernel of ours (else nothing would be checked under the PCIe choice). `table`:
    the query program's answer on the file ({usable, why, rows}), None when none was written."""
    rows = table["rows"] if table and table["usable"] else []
    ours = [row for row in rows if row["winner"] != NCCL]
    conditions = [("tune exits 0", returncode == 0),
                  ("it found the PCIe case", "ranks: PCIe (push kernels only)" in output),
                  ("the library follows the table", "the library follows the table at every size measured" in output),
                  ("a table the library reads", bool(table) and table["usable"]),
                  ("every row of the PCIe case", bool(rows) and all(row["links"] == PCIE for row in rows)),
                  ("no pull kernel in it", all(row["winner"] not in ("1stage", "2stage") for row in rows)),
                  ("some size to a kernel of ours", bool(ours))]
    why = table["why"] if table and not table["usable"] else None
    return judged(conditions, f"exit {returncode}, {len(rows)} rows, {len(ours)} to kernels of ours"
                              + (f"; not usable: {why}" if why else ""),
                  [line for line in output.splitlines() if line.startswith(("tune:", "table:", "  "))][:20])


def following(ranks, returncodes, logs, rows):
    """allreduce_e2e under the test topology and the table tune wrote, at TRACE: every sum
    exact; every rank eligible over PCIe and tuned; every call taken is what the table gives
    its size and type (push kernels only), as many traced as released; the rest forwarded as
    tuned, untuned (no row) or too-large."""
    seen = tally(*logs)
    reports, calls, above = _checks(logs)
    traced = [call for text in logs for call in taken_calls(text)]
    wrong = [f"{call.bytes} bytes of {call.type} -> {call.kernel} (the table: "
             f"{winner_at(rows, 'all-reduce', ranks, PCIE, FAMILIES.get(call.type), call.bytes)})"
             for call in traced
             if winner_at(rows, "all-reduce", ranks, PCIE, FAMILIES.get(call.type), call.bytes) != call.kernel]
    others = forwarded_except(seen, (TUNED, UNTUNED, TOO_LARGE))
    conditions = [("every rank exits 0 (every sum exact)", all_zero(returncodes)),
                  (f"{ranks} ranks report their checks", len(reports) == ranks),
                  (f"{ranks} ranks eligible over PCIe, tuned", seen.links[PCIE] == ranks and seen.pcie_untuned == 0),
                  (f"{ranks} ranks released", seen.releases == ranks),
                  ("calls taken", seen.taken_calls > 0),
                  ("each traced", len(traced) == seen.taken_calls),
                  ("each as the table says", not wrong),
                  ("never a pull kernel", seen.taken["1stage"] + seen.taken["2stage"] == 0),
                  (f"all {above} calls above the limit forwarded as {TOO_LARGE}",
                   seen.forward_reasons[TOO_LARGE] == above),
                  ("no call forwarded for another reason than tuned, untuned, too-large", not others)]
    return judged(conditions, f"exit {codes(returncodes)}, {seen.taken_calls} of {calls} calls taken "
                              f"({counts(+seen.taken)}), {seen.forwarded} forwarded ({counts(seen.forward_reasons)})",
                  wrong[:5] + lines_with(logs[:1], "released:"))
