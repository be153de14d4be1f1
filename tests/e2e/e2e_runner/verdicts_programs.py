"""Verdicts on the runs of our own end-to-end programs (tests/e2e/*.cc), from their exit
codes and their logs (the program's lines and the library's). Pure functions: the runner's
CPU tests feed them canned logs."""

from .verdict import SKIPPED, Verdict, all_zero, codes, judged, lines_matching, lines_with, tally

# What rank 0's log must hold after each recovery scenario (tests/e2e/recovery_e2e.cc):
# the library's own account of what it did.
RECOVERY_EVIDENCE = {
    "shrink-abort": "ncclCommShrink(NCCL_SHRINK_ABORT): our kernels told to stop",
    "revoke": "(262144 bytes) forwarded 1 (ineligible-comm=1)",
    "finalize-abort": "our kernels told to stop (an abort came while we waited)",
    "destroy-abort": "our kernels told to stop (an abort came while we waited)",
    "destroy-alone": "did not finish within 30 s of ncclCommDestroy",
    "setup-abort": "ncclAllReduce while another thread",
    "ineligible-abort": "ncclCommAbort: our kernels told to stop",
    "async-error": "NCCL reports the communicator broken",
}
# recovery_e2e's exit code when the real NCCL cannot run the scenario (too old a version).
CANNOT_RUN_HERE = 77


def allreduce_ranks(ranks, returncodes, logs):
    """allreduce_e2e, one process per rank: every check right and every rank eligible."""
    seen = tally(*logs)
    return judged([("every rank exits 0 (every sum exact)", all_zero(returncodes)),
                   (f"{ranks} ranks eligible", seen.eligible == ranks)],
                  f"exit {codes(returncodes)}, {seen.eligible}/{ranks} ranks eligible, "
                  f"{seen.taken_calls} calls taken",
                  sorted(lines_with(logs, "checks,")) + lines_with(logs[:1], "released:"))


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


def abort_watchdog(returncode0, log0):
    """abort_e2e: rank 0, waiting in our kernel for a peer that never comes, gets control
    back within 5 s of its watchdog's ncclCommAbort (the program times it)."""
    return judged([("rank 0 exits 0 (back within 5 s of the abort)", returncode0 == 0)],
                  f"rank 0 exit {returncode0}", lines_with([log0], "returned"))


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
                  lines_with(logs, "checks,"))


def recovery(scenario, returncodes, log0):
    """recovery_e2e SCENARIO on two ranks: both pass, and rank 0's log shows our side's part."""
    verdict_line = next(iter(lines_with([log0], f"{scenario}:")), "no verdict line")
    if returncodes[0] == CANNOT_RUN_HERE:
        return Verdict(SKIPPED, verdict_line)
    evidence = RECOVERY_EVIDENCE[scenario]
    return judged([("both ranks exit 0", all_zero(returncodes)),
                   (f"rank 0's log says '{evidence}'", evidence in log0)],
                  f"exit {codes(returncodes)}: {verdict_line}")


def release_processes(returncodes, logs):
    """release_e2e processes: rank 0 waited for a late peer once, kept its block for a later
    peer twice, and freed those later."""
    waited = len(lines_with(logs[:1], "buffers freed once every peer had let go of them"))
    kept = len(lines_with(logs[:1], "buffers kept allocated: 1 peer rank(s) still map them"))
    freed = len(lines_with(logs[:1], "buffers kept at release freed"))
    return judged([("both ranks exit 0", all_zero(returncodes)),
                   ("rank 0 waited for its peer at least once", waited >= 1),
                   ("rank 0 kept its block at least twice", kept >= 2),
                   ("rank 0 freed kept blocks later at least twice", freed >= 2)],
                  f"exit {codes(returncodes)}; rank 0 waited {waited}, kept {kept}, freed later {freed}",
                  lines_matching(logs, r"PASS|FAIL"))


def release_initall(ranks, returncode, log):
    """release_e2e initall: in one process, blocks are kept while a rank of the same process
    maps them and freed by a later release."""
    least = 2 * (ranks - 1)
    kept = len(lines_with([log], "buffers kept allocated"))
    freed = len(lines_with([log], "buffers kept at release freed"))
    return judged([("exit 0", returncode == 0),
                   (f"blocks kept at least {least} times", kept >= least),
                   (f"kept blocks freed at least {least} times", freed >= least)],
                  f"exit {returncode}; kept {kept}, freed later {freed}", lines_matching([log], r"PASS|FAIL"))


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
