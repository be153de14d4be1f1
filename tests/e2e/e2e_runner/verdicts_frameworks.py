"""Verdicts on the runs of other people's programs through the library: nccl-tests'
all_reduce_perf (read with the command-line tool's parser, tools/nccl_car_cli/nccl_tests.py),
PyTorch, a ctypes client as vLLM's PyNccl, JAX. Pure functions of exit codes and logs."""

import re
from collections import Counter

from .verdict import all_zero, codes, counts, forwarded_except, judged, lines_matching, lines_with, tally
from nccl_car_cli.nccl_tests import parse_output  # noqa: E402  (tools/ is on the path: .verdict)

# What nccl-tests' -d all runs at least (newer builds add f8e4m3 and f8e5m2, where NCCL and
# the GPU have them), by the names its table prints.
NCCL_TESTS_TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16")
# The one forward reason a run through the library may show when it takes every op and type:
# sizes above its limit belong to NCCL.
TOO_LARGE = "too-large"
# A size too small for one element of a type makes all_reduce_perf call with count 0, which
# there is nothing to do for; the library may leave that to NCCL.
EMPTY = "empty"


def nccl_tests(returncode, log, min_eligible=None):
    """all_reduce_perf -c 1: it ran to its end, no size had a wrong element, its own bounds
    check passed and, where asked, enough communicators were eligible."""
    output = parse_output(log)
    wrong = sum((row.out_of_place.wrong or 0) + (row.in_place.wrong or 0) for row in output.rows)
    seen = tally(log)
    conditions = [("exit 0", returncode == 0),
                  ("a table of results", len(output.rows) > 0),
                  ("#wrong 0", wrong == 0),
                  ("Out of bounds values : 0 OK", output.bounds_ok is True and output.out_of_bounds == 0)]
    if min_eligible is not None:
        conditions.append((f"at least {min_eligible} eligible", seen.eligible >= min_eligible))
    return judged(conditions, f"exit {returncode}, {len(output.rows)} sizes, #wrong {wrong}, {seen.eligible} "
                              f"communicator ranks eligible, {seen.taken_calls} calls taken")


def nccl_tests_every_type(returncode, log, op, sizes, ranks):
    """all_reduce_perf -c 1 -d all -o OP over one sweep of `sizes` sizes, on `ranks` ranks
    through the library: it ran to its end with every type at every size and only OP; no
    element wrong; every rank eligible and released; calls taken; and no call forwarded but
    too-large ones (and empty ones, where a size holds no whole element of a type)."""
    output = parse_output(log)
    rows = output.rows
    wrong = sum((row.out_of_place.wrong or 0) + (row.in_place.wrong or 0) for row in rows)
    unchecked = sum(row.out_of_place.wrong is None or row.in_place.wrong is None for row in rows)
    per_type = Counter(row.dtype for row in rows)
    short = [dtype for dtype in NCCL_TESTS_TYPES if per_type[dtype] != sizes]
    other_ops = sorted({row.redop for row in rows} - {op})
    seen = tally(log)
    allowed = (TOO_LARGE, EMPTY) if any(row.count == 0 for row in rows) else (TOO_LARGE,)
    unexpected = forwarded_except(seen, allowed)
    conditions = [("exit 0", returncode == 0),
                  ("a table of results", len(rows) > 0),
                  ("#wrong 0", wrong == 0),
                  ("every row checked (no N/A)", unchecked == 0),
                  ("Out of bounds values : 0 OK", output.bounds_ok is True and output.out_of_bounds == 0),
                  (f"{sizes} sizes of each of {', '.join(NCCL_TESTS_TYPES)}", not short),
                  (f"only {op} rows", not other_ops),
                  (f"{ranks} ranks eligible", seen.eligible >= ranks),
                  (f"{ranks} ranks released", seen.releases >= ranks),
                  ("calls taken", seen.taken_calls > 0),
                  (f"no call forwarded but {' or '.join(allowed)}", not unexpected)]
    extra = sorted(set(per_type) - set(NCCL_TESTS_TYPES))
    also = f": also {' '.join(extra)}" if extra else ""
    detail = (f"exit {returncode}, {len(rows)} rows ({len(per_type)} types{also}"
              f"; {op}), #wrong {wrong}, {seen.eligible} ranks eligible, {seen.taken_calls} calls taken, "
              f"{seen.forwarded} forwarded ({counts(seen.forward_reasons)})")
    notes = [f"{row.size} B {row.dtype} {row.redop}: #wrong {row.out_of_place.wrong} out of place, "
             f"{row.in_place.wrong} in place" for row in rows
             if (row.out_of_place.wrong or 0) + (row.in_place.wrong or 0)]
    if short:
        notes.append("rows per type: " + " ".join(f"{dtype}={per_type[dtype]}" for dtype in NCCL_TESTS_TYPES))
    if other_ops:
        notes.append(f"rows of other ops: {' '.join(other_ops)}")
    if unexpected:
        notes.append(f"forwarded for other reasons: {counts(unexpected)}")
    return judged(conditions, detail, notes[:8] + seen.warnings[:3])


def torch_every_op(ranks, returncode, log):
    """tests/e2e/torch_ops_e2e.py under torchrun: every rank's every all-reduce right, every
    rank eligible and released, calls taken, and every all-reduce the ranks made either taken
    or forwarded as too-large (the largest of an integer or fp64 type may be), none forwarded
    for another reason. A rank's PASS line counts wherever it starts: the ranks share
    torchrun's output."""
    passes = dict(re.findall(rf"rank (\d+)/{ranks}: PASS (\d+) all-reduces", log))
    made = sum(int(count) for count in passes.values())
    seen = tally(log)
    unexpected = forwarded_except(seen, (TOO_LARGE,))
    conditions = [("exit 0", returncode == 0),
                  (f"all {ranks} ranks pass", len(passes) == ranks),
                  (f"{ranks} ranks eligible", seen.eligible >= ranks),
                  (f"{ranks} ranks released", seen.releases >= ranks),
                  ("calls taken", seen.taken_calls > 0),
                  (f"the {made} all-reduces made taken or {TOO_LARGE}",
                   made > 0 and seen.taken_calls + seen.forward_reasons[TOO_LARGE] >= made),
                  (f"no call forwarded but {TOO_LARGE}", not unexpected)]
    notes = lines_matching([log], rf"rank \d+/{ranks}: (WRONG|FAIL|skipped)")[:8]
    if unexpected:
        notes.append(f"forwarded for other reasons: {counts(unexpected)}")
    return judged(conditions, f"exit {returncode}, {len(passes)}/{ranks} ranks passed, {made} all-reduces made, "
                              f"{seen.eligible} eligible, {seen.taken_calls} calls taken, {seen.forwarded} forwarded "
                              f"({counts(seen.forward_reasons)})", notes + seen.warnings[:3])


def torch_ranks(ranks, returncode, log, calls_taken=True):
    """tests/e2e/torch_e2e.py under torchrun: every rank passes every phase and, where asked,
    our kernels took calls."""
    passed = len(lines_matching([log], rf"^rank \d+/{ranks}: PASS"))
    seen = tally(log)
    conditions = [("exit 0", returncode == 0), (f"all {ranks} ranks pass", passed == ranks)]
    if calls_taken:
        conditions.append(("calls taken", seen.taken_calls > 0))
    return judged(conditions, f"exit {returncode}, {passed}/{ranks} ranks passed, {seen.eligible} communicators "
                              f"eligible, {seen.taken_calls} calls taken",
                  lines_matching([log], r"phase .*FAIL|WRONG")[:5])


# The watchdog's 5 s timeout, then PyTorch's own delay before it aborts: well under this.
_WATCHDOG_ABORT_SECONDS = 50


def torch_watchdog_abort(returncode, seconds, log, timed_out_code):
    """tests/e2e/torch_abort.py: a peer never joins; PyTorch's watchdog aborts through our
    hook, which stops our kernel, and the job fails with PyTorch's timeout error in time."""
    reported = lines_matching([log], r"watchdog caught collective operation timeout|timed out", flags=re.IGNORECASE)
    told = lines_with([log], "ncclCommAbort: our kernels told to stop")
    return judged([("the job fails", returncode != 0),
                   ("not by our time limit", returncode != timed_out_code),
                   (f"ends within {_WATCHDOG_ABORT_SECONDS} s", seconds < _WATCHDOG_ABORT_SECONDS),
                   ("a timeout error reported", len(reported) > 0),
                   ("our abort hook stopped a kernel", len(told) > 0)],
                  f"ended after {seconds:.0f} s with exit {returncode}; {len(reported)} timeout error lines; "
                  f"our abort hook stopped kernels on {len(told)} communicator(s)")


def ctypes_client(mode, ranks, returncodes, logs):
    """tests/e2e/ctypes_allreduce.py, one process per rank, brought in by `mode`: every rank's
    sums right and, except under LD_PRELOAD (which cannot reach a ctypes handle), every rank
    eligible and calls taken; under LD_PRELOAD no communicator may reach the library."""
    passed = len(lines_matching(logs, rf"^rank \d+/{ranks}: PASS"))
    seen = tally(*logs)
    conditions = [("every rank exits 0", all_zero(returncodes)), (f"all {ranks} ranks right", passed == ranks)]
    if mode == "preload":
        conditions.append(("no communicator set up", seen.setups == 0 and not seen.not_understood))
    else:
        conditions += [(f"{ranks} ranks eligible", seen.eligible == ranks), ("calls taken", seen.taken_calls > 0)]
    if mode == "tool-auto":
        conditions.append(("nccl-car run chose mode audit", bool(lines_with(logs, "mode audit"))))
    return judged(conditions, f"exit {codes(returncodes)}, results right on {passed}/{ranks} ranks, {seen.eligible} "
                              f"eligible, {seen.taken_calls} calls taken",
                  lines_matching(logs, r"WRONG|failed|NCCL-CAR WARN")[:5])


def jax_through_tool(returncode, log):
    """tests/e2e/jax_psum.py under `nccl-car run` (no --mode): the tool chose LD_AUDIT, the
    sums are right, communicators were eligible and our kernels took calls. JAX never
    destroys its communicators, so no released: line counts them: the TRACE lines do."""
    seen = tally(log)
    taken = sum(seen.traced.values())
    return judged([("exit 0", returncode == 0),
                   ("mode audit chosen", bool(lines_with([log], "mode audit"))),
                   ("every device's sums right", bool(lines_with([log], "devices: PASS"))),
                   ("communicators eligible", seen.eligible > 0),
                   ("calls taken", taken > 0)],
                  f"exit {returncode}, {seen.eligible} eligible, {taken} calls taken; "
                  + "; ".join(lines_with([log], "jax psum")),
                  lines_matching([log], r"^nccl-car|^  (taken|forwarded|not eligible|WARN lines)"))


def jax_preloaded(returncode, log):
    """The same under `nccl-car run --mode preload`: sums right, and the tool's summary says
    no communicator reached the library and names --mode audit."""
    return judged([("exit 0", returncode == 0),
                   ("every device's sums right", bool(lines_with([log], "devices: PASS"))),
                   ("the summary says the library was not reached",
                    bool(lines_with([log], "no communicator reached the library"))),
                   ("the summary names --mode audit", bool(lines_with([log], "try: --mode audit")))],
                  f"exit {returncode}", lines_with([log], "no communicator reached"))
