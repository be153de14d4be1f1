"""Verdicts on the runs of other people's programs through the library: nccl-tests'
all_reduce_perf, all_gather_perf and reduce_scatter_perf (read with the command-line tool's
parser, tools/nccl_car_cli/nccl_tests.py), PyTorch, a ctypes client as vLLM's PyNccl, JAX.
Pure functions of exit codes and logs."""

import math
import re
from collections import Counter

from .verdict import (EMPTY, INELIGIBLE, NOT_READY, ONE_RANK, OP, TOO_LARGE, accelerated, all_zero, codes, counts,
                      judged, kernels_text, lines_matching, lines_with, rank_tally, tally, taken_by, took_only)
from nccl_car_cli.nccl_tests import parse_output  # noqa: E402  (tools/ is on the path: .verdict)

# What nccl-tests' -d all runs at least (newer builds add f8e4m3 and f8e5m2, where NCCL and
# the GPU have them), by the names its table prints.
NCCL_TESTS_TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16")
# nccl-tests' name for the op it makes with ncclRedOpCreatePreMulSum (-o all runs it too).
MULSUM = "mulsum"
# What its redop column says for a collective without an op (all_gather_perf).
NO_OP = "none"


def _table_conditions(returncode, output):
    """What every nccl-tests -c 1 run must show in its own output: its number of wrong
    elements and the conditions. A row of N/A was not checked (-c 0, or nothing to check):
    it proves nothing, so it fails."""
    rows = output.rows
    wrong = sum((row.out_of_place.wrong or 0) + (row.in_place.wrong or 0) for row in rows)
    unchecked = sum(row.out_of_place.wrong is None or row.in_place.wrong is None for row in rows)
    return wrong, [("exit 0", returncode == 0),
                   ("a table of results", len(rows) > 0),
                   ("#wrong 0", wrong == 0),
                   ("every row checked (no N/A)", unchecked == 0),
                   ("Out of bounds values : 0 OK", output.bounds_ok is True and output.out_of_bounds == 0)]


def _allowed_forwards(rows):
    """The forward reasons a table explains: sizes above the library's limit; count 0, where a
    size holds no whole element of a type (all_gather_perf and reduce_scatter_perf round each
    rank's part down to whole 16 bytes, so that sizes below 16 bytes a rank count 0 too);
    mulsum, an op that is not NCCL's own."""
    allowed = [TOO_LARGE]
    if any(row.count == 0 for row in rows):
        allowed.append(EMPTY)
    if any(row.redop == MULSUM for row in rows):
        allowed.append(OP)
    return tuple(allowed)


def _library_conditions(seen, ranks, allowed, kernels, collective):
    """What a nccl-tests run of `collective` requires of the library's lines (`seen`): as
    every accelerated run (verdict.accelerated, forwards for `allowed` reasons only), and the
    calls taken by that collective's kernels (of `kernels`, the library's), by no other's.
    The conditions, and the notes on forwards and kernels that should not be there."""
    ours, unexpected = accelerated(seen, ranks, allowed)
    mine, others = took_only(seen, kernels, collective)
    notes = [f"forwarded for other reasons: {counts(unexpected)}"] if unexpected else []
    if others:
        notes.append(f"taken by kernels of other collectives: {counts(others)}")
    return ours + mine, notes


def nccl_tests(returncode, log, ranks, collective="all-reduce", *, kernels):
    """all_reduce_perf, all_gather_perf or reduce_scatter_perf (`collective`) -c 1 on `ranks`
    communicator ranks through the library: it ran to its end, every row checked and none
    wrong, its own bounds check passed; every rank eligible and released, calls taken by that
    collective's kernels (of `kernels`: context.kernels), and no call forwarded for a reason
    the table does not explain."""
    output = parse_output(log)
    seen = tally(log)
    wrong, conditions = _table_conditions(returncode, output)
    ours, notes = _library_conditions(seen, ranks, _allowed_forwards(output.rows), kernels, collective)
    return judged(conditions + ours, f"exit {returncode}, {len(output.rows)} sizes, #wrong {wrong}, {seen.eligible} "
                                     f"communicator ranks eligible, {taken_by(seen, kernels, collective)} calls taken, "
                                     f"{seen.forwarded} forwarded ({counts(seen.forward_reasons)})",
                  notes + seen.warnings[:3])


def nccl_tests_every_type(returncode, log, op, sizes, ranks, collective="all-reduce", *, kernels):
    """all_reduce_perf or reduce_scatter_perf -c 1 -d all -o OP (all_gather_perf -d all, its
    rows' op NO_OP) over one sweep of `sizes` sizes, on `ranks` ranks through the library:
    nccl_tests' conditions, and every type at every size and only OP (so nothing may be
    forwarded but too-large calls, and empty ones where a size holds no whole element of a
    type)."""
    output = parse_output(log)
    rows = output.rows
    per_type = Counter(row.dtype for row in rows)
    short = [dtype for dtype in NCCL_TESTS_TYPES if per_type[dtype] != sizes]
    other_ops = sorted({row.redop for row in rows} - {op})
    seen = tally(log)
    wrong, conditions = _table_conditions(returncode, output)
    allowed = tuple(reason for reason in _allowed_forwards(rows) if reason != OP)
    ours, library_notes = _library_conditions(seen, ranks, allowed, kernels, collective)
    conditions += [(f"{sizes} sizes of each of {', '.join(NCCL_TESTS_TYPES)}", not short),
                   (f"only {op} rows", not other_ops)] + ours
    extra = sorted(set(per_type) - set(NCCL_TESTS_TYPES))
    also = f": also {' '.join(extra)}" if extra else ""
    detail = (f"exit {returncode}, {len(rows)} rows ({len(per_type)} types{also}"
              f"; {op}), #wrong {wrong}, {seen.eligible} ranks eligible, {taken_by(seen, kernels, collective)} calls "
              f"taken, {seen.forwarded} forwarded ({counts(seen.forward_reasons)})")
    notes = [f"{row.size} B {row.dtype} {row.redop}: #wrong {row.out_of_place.wrong} out of place, "
             f"{row.in_place.wrong} in place" for row in rows
             if (row.out_of_place.wrong or 0) + (row.in_place.wrong or 0)]
    if short:
        notes.append("rows per type: " + " ".join(f"{dtype}={per_type[dtype]}" for dtype in NCCL_TESTS_TYPES))
    if other_ops:
        notes.append(f"rows of other ops: {' '.join(other_ops)}")
    return judged(conditions, detail, notes[:8] + library_notes + seen.warnings[:3])


# torch_ops_e2e.py's matrices, by the noun its PASS lines count their calls by, and the
# collective each calls (PyTorch makes the list form of all_gather one ncclAllGather).
TORCH_MATRICES = {"all-reduces": "all-reduce", "reduce-scatters": "reduce-scatter", "all-gathers": "all-gather",
                  "list all-gathers": "all-gather"}


def _torch_passes(log, ranks):
    """torch_ops_e2e.py's PASS lines: {noun: {rank: (calls made, the whole matrix)}}. A line
    counts wherever it starts: the ranks share torchrun's output."""
    passes = {noun: {} for noun in TORCH_MATRICES}
    shape = r"\d+ [a-z]+(?: x \d+ [a-z]+)*"
    for rank, count, noun, shape in re.findall(rf"rank (\d+)/{ranks}: PASS (\d+) ([a-z -]+?) \(({shape})\), 0 wrong",
                                               log):
        if noun in passes:
            passes[noun][rank] = (int(count), math.prod(int(n) for n in re.findall(r"(\d+) [a-z]+", shape)))
    return passes


def _torch_taken_conditions(seen, made, kernels):
    """That the calls each collective's matrices made ({collective: calls}) were taken by its
    kernels (of `kernels`); all-reduces may be forwarded as too-large instead (the largest
    tensor of an integer or fp64 type may be), some taken; the others' sizes are all within
    the library's limits."""
    conditions = []
    for collective, calls in made.items():
        taken = taken_by(seen, kernels, collective)
        if collective == "all-reduce":
            conditions.append((f"the {calls} all-reduces made taken or {TOO_LARGE}, some taken",
                               calls > 0 and taken > 0 and taken + seen.forward_reasons[TOO_LARGE] >= calls))
        else:
            conditions.append((f"the {calls} {collective}s made taken by {kernels_text(kernels, collective)}",
                               calls > 0 and taken >= calls))
    return conditions


def torch_every_op(ranks, returncode, log, *, kernels):
    """tests/e2e/torch_ops_e2e.py under torchrun: every rank made every call of each of its
    matrices (TORCH_MATRICES; a combination PyTorch refused is a failure, not one fewer) and
    every one right; every rank eligible and released, and every call the ranks made taken by
    its collective's kernels (of `kernels`; all-reduces: or forwarded as too-large), none
    forwarded for another reason."""
    passes = _torch_passes(log, ranks)
    passed = len(set.intersection(*(set(by_rank) for by_rank in passes.values())))
    made = {collective: 0 for collective in TORCH_MATRICES.values()}
    for noun, by_rank in passes.items():
        made[TORCH_MATRICES[noun]] += sum(count for count, _ in by_rank.values())
    seen = tally(log)
    ours, unexpected = accelerated(seen, ranks)
    conditions = [("exit 0", returncode == 0)]
    conditions += [(f"all {ranks} ranks pass their {noun}", len(by_rank) == ranks) for noun, by_rank in passes.items()]
    conditions.append(("each made its whole matrices",
                       all(count == whole for by_rank in passes.values() for count, whole in by_rank.values())))
    conditions += _torch_taken_conditions(seen, made, kernels) + ours
    notes = lines_matching([log], rf"rank \d+/{ranks}: (WRONG|FAIL)")[:8]
    if unexpected:
        notes.append(f"forwarded for other reasons: {counts(unexpected)}")
    calls = "; ".join(f"{collective}: {calls} made, {taken_by(seen, kernels, collective)} taken"
                      for collective, calls in made.items())
    return judged(conditions, f"exit {returncode}, {passed}/{ranks} ranks passed, {seen.eligible} eligible; {calls}; "
                              f"{seen.forwarded} forwarded ({counts(seen.forward_reasons)})", notes + seen.warnings[:3])


def torch_ranks(ranks, returncode, log):
    """tests/e2e/torch_e2e.py under torchrun: every rank passes every phase, and our kernels
    took its calls: every communicator of two or more ranks eligible, every rank released,
    and nothing forwarded but calls above the limit, the first calls of a nonblocking
    communicator (its set-up runs in the background from its first call outside a group on,
    and the calls go to NCCL until the ranks agree on the first one ours take: not ready) and,
    at 2 ranks, the calls of the one-rank group of the even ranks."""
    passed = len(lines_matching([log], rf"^rank \d+/{ranks}: PASS"))
    seen = tally(log)
    refused = {reason: count for reason, count in seen.not_eligible.items() if not ONE_RANK.match(reason)}
    one_rank = len(seen.not_eligible) > len(refused)
    allowed = (TOO_LARGE, NOT_READY) + ((INELIGIBLE,) if one_rank else ())
    ours, unexpected = accelerated(seen, ranks, allowed)
    conditions = [("exit 0", returncode == 0), (f"all {ranks} ranks pass", passed == ranks),
                  ("no communicator of 2 or more ranks refused", not refused)] + ours
    notes = lines_matching([log], r"phase .*FAIL|WRONG")[:5]
    if refused:
        notes.append(f"refused: {counts(refused)}")
    if unexpected:
        notes.append(f"forwarded for other reasons: {counts(unexpected)}")
    return judged(conditions, f"exit {returncode}, {passed}/{ranks} ranks passed, {seen.eligible} communicator ranks "
                              f"eligible, {seen.taken_calls} calls taken, {seen.forwarded} forwarded "
                              f"({counts(seen.forward_reasons)})", notes)


# The watchdog's 5 s timeout, then PyTorch's own delay before it aborts: well under this.
_WATCHDOG_ABORT_SECONDS = 50


# torch_abort.py's all-reduces on rank 0: the first, which both ranks join, and the one
# rank 1 never joins.
_WATCHDOG_RANK0_CALLS = 2


def torch_watchdog_abort(returncode, seconds, log, timed_out_code):
    """tests/e2e/torch_abort.py: a peer never joins; PyTorch's watchdog aborts through our
    hook, which stops our kernel, and the job fails with PyTorch's timeout error in time. The
    blocked call was ours: rank 0's released: line (logged by that abort) counts both its
    all-reduces taken and none forwarded."""
    reported = lines_matching([log], r"watchdog caught collective operation timeout|timed out", flags=re.IGNORECASE)
    told = lines_matching([log], r"\brank 0/2 ncclCommAbort: our kernels told to stop")
    rank0 = rank_tally([log], 0, 2)
    return judged([("the job fails", returncode != 0),
                   ("not by our time limit", returncode != timed_out_code),
                   (f"ends within {_WATCHDOG_ABORT_SECONDS} s", seconds < _WATCHDOG_ABORT_SECONDS),
                   ("a timeout error reported", len(reported) > 0),
                   ("our abort hook reached rank 0", len(told) > 0),
                   (f"rank 0 released with its {_WATCHDOG_RANK0_CALLS} all-reduces taken, none forwarded",
                    rank0.releases >= 1 and rank0.taken_calls >= _WATCHDOG_RANK0_CALLS and rank0.forwarded == 0)],
                  f"ended after {seconds:.0f} s with exit {returncode}; {len(reported)} timeout error lines; "
                  f"rank 0: abort hook {'reached' if told else 'not reached'}, {rank0.releases} released, "
                  f"{rank0.taken_calls} calls taken, {rank0.forwarded} forwarded")


def _not_reached(way, seen, logs):
    """What a way in that cannot reach the program must show: no communicator of ours, and
    under `nccl-car run` a summary that says so and names --mode audit."""
    conditions = [("no communicator set up", seen.setups == 0 and not seen.not_understood)]
    if way.startswith("tool-"):
        conditions += [("nccl-car run's summary says the library was not reached",
                        bool(lines_with(logs, "no communicator reached the library"))),
                       ("the summary names --mode audit", bool(lines_with(logs, "try: --mode audit")))]
    return conditions


def torch_unreached(way, ranks, returncode, log):
    """torch_e2e.py by a way in that cannot reach pip's PyTorch (a drop-in folder: its
    libtorch_cuda.so finds its NCCL through an RPATH first): every rank passes on NCCL alone,
    and the way in says it was not reached."""
    passed = len(lines_matching([log], rf"^rank \d+/{ranks}: PASS"))
    seen = tally(log)
    return judged([("exit 0", returncode == 0), (f"all {ranks} ranks pass", passed == ranks)]
                  + _not_reached(way, seen, [log]),
                  f"exit {returncode}, {passed}/{ranks} ranks passed on NCCL alone, {seen.setups} set-ups",
                  lines_matching([log], r"phase .*FAIL|WRONG|^nccl-car: no communicator")[:5])


def ctypes_client(mode, ranks, returncodes, logs, reached=None):
    """tests/e2e/ctypes_allreduce.py, one process per rank, brought in by `mode`: every rank's
    sums right and, where the way in reaches the client's NCCL (`reached`; by default every way
    but LD_PRELOAD, which cannot reach a ctypes handle), every rank eligible and calls taken;
    where it does not, no communicator may reach the library, and `nccl-car run`'s summary says
    so and names --mode audit."""
    reached = mode != "preload" if reached is None else reached
    passed = len(lines_matching(logs, rf"^rank \d+/{ranks}: PASS"))
    seen = tally(*logs)
    conditions = [("every rank exits 0", all_zero(returncodes)), (f"all {ranks} ranks right", passed == ranks)]
    if mode == "tool-auto":
        conditions.append(("nccl-car run chose mode audit", bool(lines_with(logs, "mode audit"))))
    if not reached:
        conditions += _not_reached(mode, seen, logs)
    else:
        conditions += accelerated(seen, ranks)[0]
        if mode.startswith("tool-"):
            conditions.append(("nccl-car run's summary shows calls taken",
                               bool(lines_matching(logs, r"^  taken: [1-9][0-9]* call\(s\)"))))
    return judged(conditions, f"exit {codes(returncodes)}, results right on {passed}/{ranks} ranks, {seen.eligible} "
                              f"eligible, {seen.taken_calls} calls taken",
                  lines_matching(logs, r"WRONG|failed|NCCL-CAR WARN")[:5])


# ctypes_allreduce_config.py's account of what the library must have counted.
_CONFIG_EXPECT = re.compile(r"rank \d+/\d+: expect requested=(?P<requested>\d+) too-large=(?P<large>\d+) "
                            r"1shot>=(?P<one>\d+) 2shot>=(?P<two>\d+)")


def ctypes_config(ranks, returncodes, logs):
    """tests/e2e/ctypes_allreduce_config.py under LD_AUDIT: every sum right and every
    completion event recorded; the calls whose option was "nccl" forwarded as requested, those
    above the limit as too-large, and the others taken, the forced kernels at least as often
    as they were asked for."""
    seen = tally(*logs)
    expected = [match for match in map(_CONFIG_EXPECT.search, lines_with(logs, ": expect ")) if match]
    requested = sum(int(match["requested"]) for match in expected)
    large = sum(int(match["large"]) for match in expected)
    ones = sum(int(match["one"]) for match in expected)
    twos = sum(int(match["two"]) for match in expected)
    passed = len(lines_matching(logs, rf"^rank \d+/{ranks}: PASS"))
    ours, _ = accelerated(seen, ranks, allowed=(TOO_LARGE, "requested"))
    conditions = [("every rank exits 0", all_zero(returncodes)),
                  (f"all {ranks} ranks right, every completion event recorded", passed == ranks),
                  (f"{ranks} ranks say what to expect", len(expected) == ranks)] + ours + [
                  (f"{requested} calls forwarded as requested", seen.forward_reasons["requested"] == requested),
                  (f"{large} calls forwarded as {TOO_LARGE}", seen.forward_reasons[TOO_LARGE] == large),
                  (f"1shot took at least the {ones} calls that asked for it", seen.taken["1shot"] >= ones),
                  (f"2shot took at least the {twos} calls that asked for it", seen.taken["2shot"] >= twos)]
    return judged(conditions, f"exit {codes(returncodes)}, {passed}/{ranks} ranks right, {seen.taken_calls} calls "
                              f"taken ({counts(seen.taken)}), forwarded {counts(seen.forward_reasons)}",
                  lines_matching(logs, r"WRONG|not recorded|failed|NCCL-CAR WARN")[:5])


def jax_through_tool(returncode, log):
    """tests/e2e/jax_psum.py under `nccl-car run` (no --mode): the tool chose LD_AUDIT, the
    sums are right, communicators were eligible and our kernels took calls. JAX never
    destroys its communicators: their lines at exit count the calls, and the tool's summary
    must show them taken (issue 47: it said "taken: 0 call(s)")."""
    seen = tally(log)
    summary = lines_matching([log], r"^  taken: [1-9][0-9]* call\(s\)")
    return judged([("exit 0", returncode == 0),
                   ("mode audit chosen", bool(lines_with([log], "mode audit"))),
                   ("every device's sums right", bool(lines_with([log], "devices: PASS"))),
                   ("communicators eligible", seen.eligible > 0),
                   ("every communicator rank counted at exit", seen.alive_at_exit == seen.setups > 0),
                   ("calls taken, counted at exit", seen.taken_calls > 0),
                   ("the summary shows them taken", len(summary) == 1)],
                  f"exit {returncode}, {seen.eligible} eligible, {seen.alive_at_exit} alive at exit, "
                  f"{seen.taken_calls} calls taken; " + "; ".join(lines_with([log], "jax psum")),
                  lines_matching([log], r"^nccl-car|^  (taken|forwarded|not eligible|WARN lines|\d+ communicator)"))


def torch_imported(way, returncode, log):
    """`import torch` by a way in: it imports (issue 47: under LD_AUDIT it failed with
    "undefined symbol: ncclDevCommDestroy") and its NCCL answers its version."""
    unbound = lines_matching([log], r"undefined symbol|symbol lookup error|cannot open shared object")
    return judged([("exit 0", returncode == 0),
                   ("imported, NCCL's version read", bool(lines_matching([log], r"^import torch: ok .* nccl True"))),
                   ("every symbol bound", not unbound)],
                  f"{way}: exit {returncode}; " + "; ".join(lines_with([log], "import torch")), unbound[:5])


def jax_preloaded(returncode, log):
    """The same under `nccl-car run --mode preload`: sums right, and the tool's summary says
    no communicator reached the library and names --mode audit."""
    return judged([("exit 0", returncode == 0),
                   ("every device's sums right", bool(lines_with([log], "devices: PASS"))),
                   ("the summary says the library was not reached",
                    bool(lines_with([log], "no communicator reached the library"))),
                   ("the summary names --mode audit", bool(lines_with([log], "try: --mode audit")))],
                  f"exit {returncode}", lines_with([log], "no communicator reached"))
