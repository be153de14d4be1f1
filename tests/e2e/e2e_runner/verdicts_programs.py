"""Verdicts on the runs of our own end-to-end programs (tests/e2e/*.cc), from their exit
codes and their logs (the program's lines and the library's). Pure functions: the runner's
CPU tests feed them canned logs."""

import re

from .verdict import (NOT_READY, SKIPPED, TOO_LARGE, Verdict, accelerated, all_zero, codes, counts,
                      judged, lines_matching, lines_with, tally)

# What rank 0's log must hold after each recovery scenario (tests/e2e/recovery_e2e.cc):
# the library's own account of what it did.
RECOVERY_EVIDENCE = {
    "shrink-abort": "ncclCommShrink(NCCL_SHRINK_ABORT): our kernels told to stop",
    "revoke": "ncclCommRevoke: our kernels told to stop",
    "finalize-abort": "our kernels told to stop (an abort came while we waited)",
    "destroy-abort": "our kernels told to stop (an abort came while we waited)",
    "destroy-alone": "did not finish within 30 s of ncclCommDestroy",
    # The set-up in the background ends as released or as stopped, whichever it sees first.
    "setup-abort": "during set-up",
    "ineligible-abort": "ncclCommAbort: our kernels told to stop",
    "async-error": "NCCL reports the communicator broken",
}
# What else rank 0's released: lines must count after each recovery scenario: its one
# all-reduce (RECOVERY_BYTES, the one rank 1 never joins) taken by our kernels, and what NCCL
# took after it, by reason (the later all-reduce of revoke and async-error goes to NCCL, which
# refuses it: not counted, as NCCL ran nothing). None where the all-reduce never got past our
# set-up (its evidence says we refused it) and the communicator, never set up, logs no
# released: line. async-error makes its calls while its nonblocking communicator is set up:
# some go to NCCL as not ready, and ours take the rest (RECOVERY_ANY_TAKEN).
RECOVERY_FORWARDS = {
    "shrink-abort": {},
    "revoke": {},
    "finalize-abort": {},
    "destroy-abort": {},
    "destroy-alone": {},
    "setup-abort": None,
    "ineligible-abort": {},
    "async-error": {},
}
RECOVERY_ANY_TAKEN = {"async-error"}
RECOVERY_BYTES = 262144
# recovery_e2e's exit code when the real NCCL cannot run the scenario (too old a version).
CANNOT_RUN_HERE = 77

# allreduce_e2e's summary line: its checks, those of calls above the library's limit, the wrong ones.
_CHECKS = re.compile(r"rank \d+/\d+: (?P<checks>\d+) checks \((?P<above>\d+) above \d+ bytes\), "
                     r"(?P<wrong>\d+) wrong")


def allreduce_ranks(ranks, returncodes, logs):
    """allreduce_e2e, one process per rank: every check right, every rank eligible and
    released, every call up to the library's limit taken by our kernels and every call above
    it forwarded as too-large, none for another reason."""
    seen = tally(*logs)
    reports = [match for match in map(_CHECKS.search, lines_with(logs, " checks (")) if match]
    calls = sum(int(match["checks"]) for match in reports)
    above = sum(int(match["above"]) for match in reports)
    ours, unexpected = accelerated(seen, ranks)
    conditions = [("every rank exits 0 (every sum exact)", all_zero(returncodes)),
                  (f"{ranks} ranks report their checks", len(reports) == ranks)] + ours + [
                  (f"all {calls - above} calls up to the limit taken", seen.taken_calls == calls - above),
                  (f"all {above} calls above it forwarded as {TOO_LARGE}", seen.forward_reasons[TOO_LARGE] == above)]
    notes = sorted(line.strip() for line in lines_with(logs, " checks (")) + lines_with(logs[:1], "released:")
    if unexpected:
        notes.append(f"forwarded for other reasons: {counts(unexpected)}")
    return judged(conditions, f"exit {codes(returncodes)}, {seen.eligible}/{ranks} ranks eligible, "
                              f"{seen.taken_calls} of {calls - above} calls taken, {seen.forwarded} forwarded "
                              f"({counts(seen.forward_reasons)})", notes)


def setup_fault(returncodes, logs):
    """A fault injected on one rank at set-up: every rank forwards, results stay right, and
    a WARN says why."""
    seen = tally(*logs)
    forwarding = sum(seen.not_eligible.values())
    return judged([("every rank exits 0 (results right)", all_zero(returncodes)),
                   ("every rank forwards", forwarding == len(logs)),
                   ("a WARN", len(seen.warnings) >= 1)],
                  f"exit {codes(returncodes)}, {forwarding}/{len(logs)} ranks forward, {len(seen.warnings)} WARN",
                  lines_with(logs[:1], "setup: not eligible"))


_STREAM_RETURNED = re.compile(r"rank 0: stream returned \((?P<error>[^)]*)\) (?P<seconds>-?[0-9.]+) s after the abort")


def abort_watchdog(returncode0, log0):
    """abort_e2e: rank 0's one all-reduce, taken by our kernel (its released: line says so;
    NCCL's own abort of a forwarded call would not) and still waiting for a peer that never
    comes when its watchdog calls ncclCommAbort, returns without error within 5 s after that
    abort, not before it."""
    seen = tally(log0)
    returned = _STREAM_RETURNED.search(log0)
    seconds = float(returned["seconds"]) if returned else None
    return judged([("rank 0 exits 0", returncode0 == 0),
                   ("its all-reduce still running at the abort",
                    bool(lines_with([log0], "watchdog found the all-reduce still running"))),
                   ("the stream returned without error", returned is not None and returned["error"] == "no error"),
                   ("0 to 5 s after the abort", seconds is not None and 0 <= seconds < 5),
                   ("the all-reduce taken by our kernel, nothing forwarded",
                    seen.releases >= 1 and seen.taken_calls == 1 and seen.forwarded == 0)],
                  f"rank 0 exit {returncode0}, {seen.taken_calls} calls taken, {seen.forwarded} forwarded",
                  lines_with([log0], "rank 0: "))


# memcheck and synccheck end with "ERROR SUMMARY: N errors", racecheck with
# "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)".
_SANITIZER_SUMMARY = r"ERROR SUMMARY|RACECHECK SUMMARY"
_SANITIZER_CLEAN = r"ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)"


def sanitizer(returncodes, logs):
    """compute-sanitizer over allreduce_e2e's ranks: each rank right, each tool clean, and
    our kernels really ran under the tool (rank 0 took calls)."""
    clean = [bool(lines_matching([log], _SANITIZER_CLEAN)) for log in logs]
    taken = tally(logs[0]).taken_calls
    summaries = "; ".join(line.strip("= ") for line in lines_matching(logs, _SANITIZER_SUMMARY))
    return judged([("every rank exits 0", all_zero(returncodes)),
                   ("every rank's tool reports nothing", all(clean)),
                   ("rank 0 took calls", taken > 0)],
                  f"exit {codes(returncodes)}; {summaries or 'no summary'}; rank 0 took {taken} calls",
                  lines_with(logs, " checks ("))


def recovery(scenario, returncodes, log0, log1=None):
    """recovery_e2e SCENARIO on two ranks: both pass, rank 0's log shows our side's part, and
    the all-reduce the recovery call ended was ours (RECOVERY_FORWARDS). Where both ranks make
    the same calls (RECOVERY_ANY_TAKEN), rank 1's log (`log1`) must count them as rank 0's does:
    the ranks agreed on the first call ours took."""
    verdict_line = next(iter(lines_with([log0], f"{scenario}:")), "no verdict line")
    if returncodes[0] == CANNOT_RUN_HERE:
        return Verdict(SKIPPED, verdict_line)
    evidence = RECOVERY_EVIDENCE[scenario]
    conditions = [("both ranks exit 0", all_zero(returncodes)),
                  (f"rank 0's log says '{evidence}'", evidence in log0)]
    forwards = RECOVERY_FORWARDS[scenario]
    seen = tally(log0)
    if scenario in RECOVERY_ANY_TAKEN:
        reasons = dict(+seen.forward_reasons)
        conditions += [("rank 0's all-reduces taken by our kernel once the ranks agreed",
                        seen.releases >= 1 and seen.taken_calls >= 1 and
                        seen.taken_bytes == seen.taken_calls * RECOVERY_BYTES),
                       ("forwarded only while not ready", set(reasons) <= {NOT_READY})]
        other = tally(log1 or "")
        conditions.append(("rank 1 took and forwarded the same calls (the ranks agreed)",
                           (other.taken_calls, other.taken_bytes, +other.forward_reasons) ==
                           (seen.taken_calls, seen.taken_bytes, +seen.forward_reasons)))
    elif forwards is not None:
        conditions += [(f"rank 0's all-reduce of {RECOVERY_BYTES} bytes taken by our kernel",
                        seen.releases >= 1 and seen.taken_calls == 1 and seen.taken_bytes == RECOVERY_BYTES),
                       (f"forwarded after it: {counts(forwards) or 'none'}",
                        dict(+seen.forward_reasons) == forwards and seen.forwarded == sum(forwards.values()))]
    return judged(conditions, f"exit {codes(returncodes)}: {verdict_line}; rank 0: {seen.taken_calls} calls taken "
                              f"({seen.taken_bytes} bytes), {seen.forwarded} forwarded ({counts(seen.forward_reasons)})")


# release_e2e's account of its all-reduces: made, checked (completed and compared), wrong.
_RELEASE_CALLS = re.compile(r"(?P<who>rank \d+|initall): (?P<made>\d+) all-reduces \((?P<checked>\d+) checked\), "
                            r"(?P<wrong>\d+) wrong")


def _release_calls(log):
    """The program's account of its all-reduces (made, checked, wrong), or None."""
    found = _RELEASE_CALLS.search(log)
    return (int(found["made"]), int(found["checked"]), int(found["wrong"])) if found else None


def _all_ours(log):
    """The conditions that every all-reduce a release_e2e process made was taken by our
    kernels and that every one it checked was right."""
    calls = _release_calls(log)
    seen = tally(log)
    made, checked, wrong = calls or (0, 0, 0)
    return [("its all-reduces counted", calls is not None and checked > 0),
            ("every checked result right", calls is not None and wrong == 0),
            (f"all {made} taken by our kernels, none forwarded", seen.taken_calls == made and seen.forwarded == 0)]


def release_processes(returncodes, logs):
    """release_e2e processes: rank 0 waited for a late peer once, kept its block for a later
    peer twice, and released those later; on both ranks every all-reduce (each completed one
    checked) was taken by our kernels."""
    waited = len(lines_with(logs[:1], "buffers back in the pool once every peer had let go of them"))
    kept = len(lines_with(logs[:1], "buffers kept allocated: 1 peer rank(s) still map them"))
    freed = len(lines_with(logs[:1], "buffers kept at release back in the pool"))
    conditions = [("both ranks exit 0", all_zero(returncodes)),
                  ("rank 0 waited for its peer at least once", waited >= 1),
                  ("rank 0 kept its block at least twice", kept >= 2),
                  ("rank 0 released kept blocks later at least twice", freed >= 2)]
    for rank, log in enumerate(logs):
        conditions += [(f"rank {rank}: {description}", holds) for description, holds in _all_ours(log)]
    return judged(conditions, f"exit {codes(returncodes)}; rank 0 waited {waited}, kept {kept}, released later {freed}",
                  lines_matching(logs, r"PASS|FAIL|all-reduces \("))


def release_initall(ranks, returncode, log):
    """release_e2e initall: in one process, blocks are kept while a rank of the same process
    maps them and released by a later release; every all-reduce (each completed one checked)
    was taken by our kernels."""
    least = 2 * (ranks - 1)
    kept = len(lines_with([log], "buffers kept allocated"))
    freed = len(lines_with([log], "buffers kept at release back in the pool"))
    return judged([("exit 0", returncode == 0),
                   (f"blocks kept at least {least} times", kept >= least),
                   (f"kept blocks released at least {least} times", freed >= least)] + _all_ours(log),
                  f"exit {returncode}; kept {kept}, released later {freed}; {tally(log).taken_calls} calls taken",
                  lines_matching([log], r"PASS|FAIL|all-reduces \("))


def release_devices(returncodes, logs):
    """release_e2e devices: two processes each driving two GPUs (nccl-tests -g 2 under MPI)
    are not ours (docs/design.md, Known limitations): every cycle's communicator forwards,
    saying why, and stays right, and nothing is left behind (the exit codes)."""
    seen = tally(*logs)
    refused = sum(ranks for reason, ranks in seen.not_eligible.items()
                  if reason.startswith("the process of rank") and "drives several GPUs" in reason)
    return judged([("both processes exit 0", all_zero(returncodes)),
                   ("no eligible set-up", seen.eligible == 0),
                   ("more than 4 set-ups refused as several GPUs per process", refused > 4)],
                  f"exit {codes(returncodes)}, {seen.eligible} eligible set-ups, {refused} refused as several GPUs "
                  "per process", lines_matching(logs, r"PASS|FAIL"))


def no_nvml(returncodes, logs):
    """NVML missing on one rank: NVLink cannot be confirmed, so every rank forwards, results
    stay right, and a WARN names NVML."""
    seen = tally(*logs)
    forwarding = sum(seen.not_eligible.values())
    naming = [text for text in seen.warnings if "cannot load NVML" in text]
    return judged([("every rank exits 0 (results right)", all_zero(returncodes)),
                   ("every rank forwards", forwarding == len(logs)),
                   ("a WARN naming NVML", len(naming) >= 1)],
                  f"exit {codes(returncodes)}, {forwarding}/{len(logs)} ranks forward, {len(naming)} WARN naming NVML",
                  seen.warnings[:2])


# cycles_e2e runs this many cycles before it starts counting (its kWarmUpCycles).
CYCLES_WARM_UP = 5


def cycles(cycle_count, returncodes, logs):
    """cycles_e2e: every cycle's child communicator (warm-up ones too) was set up by us and
    its one all-reduce taken by a push kernel, on both ranks; nothing leaked (the program's
    exit code)."""
    expected = len(logs) * (cycle_count + CYCLES_WARM_UP)
    pushed = sum(1 for taken in tally(*logs).released
                 if sum(taken.values()) == 1 and taken["1shot"] + taken["2shot"] == 1)
    return judged([("both ranks exit 0 (right sums, no leak)", all_zero(returncodes)),
                   (f"{expected} child communicators took their all-reduce", pushed == expected)],
                  f"exit {codes(returncodes)}; {pushed} of {expected} child communicators took their all-reduce",
                  lines_with(logs, "cycles")[-4:])


# groups_e2e's summary line: its cases, the failed ones, the all-reduces our kernels should take.
_GROUPS_SUMMARY = re.compile(r"rank \d+: groups: (?P<cases>\d+) cases, (?P<failed>\d+) failed, "
                             r"(?P<taken>\d+) all-reduces expected taken")
# Its one call NCCL refuses (an undefined type, in the group whose end must fail).
_GROUPS_REFUSED = "type"


def groups(ranks, library_run, nccl_run):
    """groups_e2e, once with the library and once with NCCL alone (the reference: the
    program expects NCCL's own group semantics): every case passes in both runs; with the
    library every all-reduce of the cases that run ours is taken, none of the simulated or
    failed groups' (so none wrote an output), and only the refused call is forwarded."""
    library_codes, library_logs = library_run
    nccl_codes, nccl_logs = nccl_run
    seen = tally(*library_logs)
    reports = [match for match in map(_GROUPS_SUMMARY.search, lines_with(library_logs, " cases, ")) if match]
    expected = sum(int(match["taken"]) for match in reports)
    ours, unexpected = accelerated(seen, ranks, allowed=(_GROUPS_REFUSED,), most={_GROUPS_REFUSED: ranks})
    conditions = [("NCCL alone: every rank exits 0 (the program's expectations are NCCL's)", all_zero(nccl_codes)),
                  ("with the library: every rank exits 0 (every case passes)", all_zero(library_codes)),
                  (f"{ranks} ranks report their cases", len(reports) == ranks)] + ours + [
                  (f"exactly the {expected} all-reduces expected taken", seen.taken_calls == expected)]
    notes = lines_matching(library_logs, r"groups: .*(PASS|FAIL)") + lines_matching(nccl_logs, r"groups: .*FAIL")
    if unexpected:
        notes.append(f"forwarded for other reasons: {counts(unexpected)}")
    return judged(conditions, f"exit {codes(library_codes)} with the library, {codes(nccl_codes)} alone; "
                              f"{seen.taken_calls} of {expected} calls taken", notes)


# creation_e2e's line: whether each creating call returned while the kernel still spun.
_CREATION = re.compile(r"rank \d+: creation \((?P<stream>\w+)\): split returned (?P<split>with|after) the kernel "
                       r"\([^)]*\); init returned (?P<init>with|after) the kernel \([^)]*\); sums (?P<sums>right|WRONG); "
                       r"destroy returned (?P<destroy>with|after) the kernel")
_COMPARED_CALLS = ("split", "init", "destroy")


def _creation_lines(logs):
    return [match for match in map(_CREATION.search, lines_with(logs, ": creation (")) if match]


def _returned_while_spinning(returncodes, logs, call):
    """Whether every rank ran and made `call` without waiting for the spinning kernel."""
    lines = _creation_lines(logs)
    return all_zero(returncodes) and len(lines) == len(logs) and all(m[call] == "with" for m in lines)


def creation(ranks, runs):
    """creation_e2e, for each stream the spinning kernel is on ('user', 'legacy'): NCCL alone
    ('nccl'), the library on communicators it takes ('eligible') and on ones it does not
    ('ineligible'); runs[(kind, stream)] = (returncodes, logs). Wherever NCCL's own call
    (split, init, destroy) returns while the program's kernel spins, ours must too, and there must
    be such a call (else nothing is shown); every run's sums are right; the taken
    communicators (the first, its split and the second) take their all-reduces; the others are
    judged not ours at the first exchange (a checked setting differs) and take none."""
    conditions, notes = [], []
    compared = 0
    for stream in ("user", "legacy"):
        for call in _COMPARED_CALLS:
            if not _returned_while_spinning(*runs[("nccl", stream)], call):
                notes.append(f"{stream} stream, {call}: NCCL alone waits for the kernel (not compared)")
                continue
            compared += 1
            for kind in ("eligible", "ineligible"):
                conditions.append((f"{kind}, {stream} stream: {call} returns while the kernel spins, as NCCL's does",
                                   _returned_while_spinning(*runs[(kind, stream)], call)))
        for kind in ("nccl", "eligible", "ineligible"):
            codes_, logs = runs[(kind, stream)]
            lines = _creation_lines(logs)
            conditions.append((f"{kind}, {stream} stream: every rank's sums right",
                               all_zero(codes_) and len(lines) == ranks and all(m["sums"] == "right" for m in lines)))
            seen = tally(*logs)
            if kind == "eligible":
                conditions += [(f"eligible, {stream} stream: all 3 communicators ours on every rank",
                                seen.eligible == 3 * ranks),
                               (f"eligible, {stream} stream: their all-reduces taken",
                                seen.taken_calls == 3 * ranks and seen.forwarded == 0)]
            elif kind == "ineligible":
                refused = sum(count for reason, count in seen.not_eligible.items() if "differs" in reason)
                conditions += [(f"ineligible, {stream} stream: all 3 communicators judged not ours on every rank",
                                seen.eligible == 0 and refused == 3 * ranks),
                               (f"ineligible, {stream} stream: nothing taken", seen.taken_calls == 0)]
            notes += [line.strip() for line in lines_with(logs, ": creation (")]
    conditions.append(("NCCL alone returns from at least one creating call while the kernel spins", compared > 0))
    return judged(conditions, f"{compared} of {2 * len(_COMPARED_CALLS)} calls compared with NCCL alone", notes)


# The reason a communicator's setup: line gives when a rank had no room for its block.
NO_ROOM = "no room for another buffer block within its NCCL_CAR_GPU_MEMORY_BYTES"


def gpu_memory_budget(ranks, returncodes, logs):
    """creation_e2e with NCCL_CAR_GPU_MEMORY_BYTES of one buffer block: on every rank the
    first communicator is ours, and its split and the second communicator, created while it
    holds the block, are NCCL's (no room), their sums right all the same."""
    seen = tally(*logs)
    refused = sum(count for reason, count in seen.not_eligible.items() if NO_ROOM in reason)
    lines = _creation_lines(logs)
    conditions = [("every rank exits 0", all_zero(returncodes)),
                  ("every rank's sums right", len(lines) == ranks and all(m["sums"] == "right" for m in lines)),
                  (f"the first communicator ours on all {ranks} ranks", seen.eligible == ranks),
                  (f"the other two refused for want of room on all {ranks} ranks", refused == 2 * ranks),
                  ("the first communicator's all-reduce taken on every rank", seen.taken_calls == ranks)]
    return judged(conditions, f"exit {codes(returncodes)}, {seen.eligible} eligible, {refused} without room, "
                              f"{seen.taken_calls} calls taken",
                  lines_with(logs, "setup: not eligible")[:4])


# guest_e2e: the all-reduces each rank's parent process makes on device buffers (all ours),
# and what goes to NCCL (by reason), per scenario.
GUEST_TAKEN = {"check-pointers": 2, "fork": 4}
GUEST_FORWARDS = {"check-pointers": {"pointer-check": 1}, "fork": {}}
# What a fork()ed child of ours says when it first meets an inherited communicator.
FORK_CHILD_EVIDENCE = "is a fork()ed child: the 1 communicator(s) it inherited are NCCL's alone here"


def guest(scenario, returncodes, logs):
    """guest_e2e SCENARIO on two ranks: both pass; every all-reduce on device buffers is
    ours, what NCCL must answer went to NCCL; after a fork the child left our side alone
    (it said so, and only the parent released it)."""
    conditions = [("both ranks exit 0", all_zero(returncodes)),
                  ("both ranks PASS", len(lines_with(logs, f"{scenario}: PASS")) == 2)]
    for rank, log in enumerate(logs):
        seen = tally(log)
        forwards = GUEST_FORWARDS[scenario]
        conditions += [(f"rank {rank}: {GUEST_TAKEN[scenario]} calls taken", seen.taken_calls == GUEST_TAKEN[scenario]),
                       (f"rank {rank}: forwarded {counts(forwards)}",
                        dict(+seen.forward_reasons) == forwards and seen.forwarded == sum(forwards.values())),
                       (f"rank {rank}: released once", seen.releases == 1)]
        if scenario == "fork":
            conditions.append((f"rank {rank}: its child says the communicator is NCCL's there",
                               FORK_CHILD_EVIDENCE in log))
    return judged(conditions, f"exit {codes(returncodes)}", lines_matching(logs, r"PASS|FAIL|child:"))


# newer_api_e2e: the all-reduces of ours each rank's log must count. suspend: the one before
# the suspend (ours, released at the suspend; the one after the resume is NCCL's, uncounted).
# grow: ranks 0 and 1 one on the first communicator and two on the grown one, rank 2 two.
NEWER_API_TAKEN = {"suspend": [1, 1], "grow": [3, 3, 2]}
SUSPEND_EVIDENCE = "ncclCommSuspend: our buffers are released with NCCL's"


def newer_api(scenario, returncodes, logs):
    """newer_api_e2e SCENARIO: every rank passes (an NCCL without the functions: skipped);
    the calls of ours are those NEWER_API_TAKEN names; suspend says it released our side;
    the grown communicator was set up eligible on every rank."""
    if any(code == CANNOT_RUN_HERE for code in returncodes):
        return Verdict(SKIPPED, next(iter(lines_with(logs, "cannot run here")), "cannot run here"))
    taken = NEWER_API_TAKEN[scenario]
    conditions = [("every rank exits 0", all_zero(returncodes)),
                  ("every rank PASS", len(lines_with(logs, f"{scenario}: PASS")) == len(taken))]
    for rank, log in enumerate(logs):
        seen = tally(log)
        conditions.append((f"rank {rank}: {taken[rank]} calls taken, none forwarded",
                           seen.taken_calls == taken[rank] and seen.forwarded == 0))
        if scenario == "suspend":
            conditions.append((f"rank {rank}: '{SUSPEND_EVIDENCE}'", SUSPEND_EVIDENCE in log))
        else:
            conditions.append((f"rank {rank}: a 3-rank communicator set up eligible",
                               any(f"/3 setup: eligible" in line for line in lines_with([log], "setup: eligible"))))
    return judged(conditions, f"exit {codes(returncodes)}", lines_matching(logs, r"PASS|FAIL"))
