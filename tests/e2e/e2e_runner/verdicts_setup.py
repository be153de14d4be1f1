"""Verdicts on the runs of tests/e2e/setup_order_e2e.cc, our set-up of a communicator (issue
24 item 3: the host never waits where NCCL would not), from their exit codes and logs. Pure
functions: the runner's CPU tests feed them canned logs."""

import re
from collections import Counter

from .verdict import (NOT_READY, TOO_LARGE, all_zero, codes, counts, forwarded_except, judged, lines_matching,
                      lines_with, tally)

# The program's two nonblocking communicators, as its lines name them.
ORDER_COMMS = ("A", "B")
# Why a nonblocking communicator's call may go to NCCL: before the ranks agree on the first
# call ours take (its first is always one), or above the library's limit (none here).
ORDER_FORWARDS = (NOT_READY, TOO_LARGE)

# The bound the runner gives the dead-peer runs, and what their surviving ranks' creating
# call may take: NCCL's own init plus our bound, with room for a slow rig.
DEAD_PEER_TIMEOUT_MS = 5000
DEAD_PEER_INIT_SECONDS = (4.0, 30.0)
# Under NCCL's lazy connections (NCCL_RUNTIME_CONNECT=1, its default) our exchange is the
# communicator's first collective, and NCCL connects to the peers inside it, on the creating
# thread: to a dead peer, until NCCL's own connection attempts give up (about 60 s on the
# rig), as it would in the program's first collective without us. Bounded by NCCL, not by us.
DEAD_PEER_LAZY_CONNECT_SECONDS = 80.0
# How the library says it gave up (shim/handshake/handshake.cc, SetUp::giveUp).
GAVE_UP = "the set-up did not complete within NCCL_CAR_SETUP_TIMEOUT_MS"

# A setup: line's communicator (its handle in that process) and what it says.
_SETUP = re.compile(r"NCCL-CAR INFO comm (?P<comm>0x[0-9a-f]+) rank \d+/\d+ setup: (?P<detail>.*)")


def _setups(log):
    """(communicator handle, detail) of every setup: line of one rank's log."""
    return [(match["comm"], match["detail"]) for match in map(_SETUP.search, log.splitlines()) if match]


def _eligible_once_each(log):
    """Whether one rank set up exactly two communicators, each eligible exactly once, and
    nothing else: the handles of those it did."""
    setups = _setups(log)
    eligible = Counter(comm for comm, detail in setups if detail.startswith("eligible ("))
    ok = len(setups) == len(ORDER_COMMS) and len(eligible) == len(ORDER_COMMS) and set(eligible.values()) == {1}
    return ok, sorted(eligible)


def _released_with_calls_taken(log, comms):
    """Whether each of one rank's communicators `comms` logs one released: line that counts
    calls taken by our kernels."""
    for comm in comms:
        seen = tally(*lines_with([log], f"comm {comm} "))
        if seen.releases != 1 or seen.taken_calls == 0:
            return False
    return bool(comms)


def opposite_order(ranks, returncodes, logs):
    """setup_order_e2e opposite-order: every rank exits 0 with both communicators' sums right
    (a hang ends at the runner's limit: exit 124, no sums); on every rank each communicator
    is set up eligible exactly once and its released: line counts calls taken; no NCCL-CAR
    WARN; nothing forwarded but comm-not-ready (before the agreed first call) or too-large."""
    seen = tally(*logs)
    right = [all(f"rank {rank} comm {name}: sums right" in log for name in ORDER_COMMS)
             for rank, log in enumerate(logs)]
    eligible = [_eligible_once_each(log) for log in logs]
    released = [_released_with_calls_taken(log, comms) for log, (_, comms) in zip(logs, eligible)]
    unexpected = forwarded_except(seen, ORDER_FORWARDS)
    conditions = [("every rank exits 0", all_zero(returncodes)),
                  ("every rank's sums right on both communicators", all(right)),
                  ("every rank sets up each communicator eligible exactly once", all(ok for ok, _ in eligible)),
                  ("every communicator's released: line counts calls taken", all(released)),
                  ("no NCCL-CAR WARN", not seen.warnings),
                  (f"no call forwarded but {' or '.join(ORDER_FORWARDS)}", not unexpected)]
    notes = [line.strip() for line in lines_matching(logs, r"^rank \d+(:| comm [AB]:) ")]
    notes += [line.strip() for line in lines_with(logs[:1], "setup: ") + lines_with(logs[:1], "released:")]
    notes += seen.warnings[:3]
    if unexpected:
        notes.append(f"forwarded for other reasons: {counts(unexpected)}")
    return judged(conditions, f"exit {codes(returncodes)}, {seen.eligible} of {len(ORDER_COMMS) * ranks} "
                              f"communicator ranks eligible, {seen.taken_calls} calls taken, {seen.forwarded} "
                              f"forwarded ({counts(seen.forward_reasons)})", notes)


_INIT_RETURNED = re.compile(r"^rank (?P<rank>\d+): init returned (?P<result>-?\d+) after (?P<seconds>[0-9.]+) s",
                            re.MULTILINE)


def init_returned(log):
    """(NCCL's result, seconds) of a surviving rank's ncclCommInitRank, or None if it never said."""
    found = _INIT_RETURNED.search(log)
    return (int(found["result"]), float(found["seconds"])) if found else None


def _times(returncodes, logs):
    """"rank 0 5.31 s, rank 1 never (exit 124)": the surviving ranks' creating calls."""
    said = []
    for rank, (code, log) in enumerate(zip(returncodes, logs)):
        returned = init_returned(log)
        said.append(f"rank {rank} " + (f"{returned[1]:.2f} s" if returned else f"never (exit {code})") +
                    (f" (result {returned[0]})" if returned and returned[0] != 0 else ""))
    return ", ".join(said)


def _gave_up(log, timeout_ms):
    """Whether one rank's log has the library's WARN that its set-up gave up at the bound."""
    return any(f"{GAVE_UP} ({timeout_ms} ms)" in text for text in tally(log).warnings)


def _not_eligible_for_it(log):
    seen = tally(log)
    return seen.eligible == 0 and any(reason.startswith(GAVE_UP) for reason in seen.not_eligible)


def dead_peer(ranks, returncodes, logs, timeout_ms=DEAD_PEER_TIMEOUT_MS, reference=None, lazy_connect=False,
              first_call=None):
    """setup_order_e2e dead-peer: the last rank made NCCL's own communicator (nothing of ours)
    and left; every other rank's ncclCommInitRank returned ncclSuccess after our bound and
    not long after it (never: the runner's limit ends it), having WARNed that the set-up did
    not complete within it and logged the communicator not eligible for that, and it exits
    0. `lazy_connect`: NCCL connects at the first collective, inside our exchange, and gives
    up on the dead peer itself: the creating call returns within
    DEAD_PEER_LAZY_CONNECT_SECONDS, the communicator not eligible with a WARN, for whichever
    came first, NCCL's failure or our bound. `reference`: (returncodes, logs) of the same run
    with NCCL alone, whose times are only shown; `first_call`: the same with NCCL alone and a
    first all-reduce before the abort, whose lines and exit codes are only shown."""
    least, most = (0.0, DEAD_PEER_LAZY_CONNECT_SECONDS) if lazy_connect else DEAD_PEER_INIT_SECONDS
    last = ranks - 1
    survivors = list(range(last))
    returned = [init_returned(logs[rank]) for rank in survivors]
    conditions = [
        (f"rank {last} made NCCL's own communicator and left",
         returncodes[last] == 0 and f"rank {last}: NCCL's own init (pncclCommInitRank) returned 0" in logs[last]),
        (f"rank {last} set up nothing of ours", tally(logs[last]).setups == 0),
        ("every surviving rank exits 0", all_zero(returncodes[:last])),
        (f"every surviving rank's init returned ncclSuccess after {least:g} to {most:g} s",
         all(found is not None and found[0] == 0 and least <= found[1] <= most for found in returned)),
    ]
    if lazy_connect:
        conditions += [("every surviving rank WARNs", all(tally(logs[rank]).warnings for rank in survivors)),
                       ("every surviving rank's communicator not eligible",
                        all(tally(logs[rank]).eligible == 0 and tally(logs[rank]).not_eligible for rank in survivors))]
    else:
        conditions += [(f"every surviving rank WARNs '{GAVE_UP} ({timeout_ms} ms)'",
                        all(_gave_up(logs[rank], timeout_ms) for rank in survivors)),
                       ("every surviving rank's communicator not eligible for it",
                        all(_not_eligible_for_it(logs[rank]) for rank in survivors))]
    notes = [line.strip() for line in lines_matching(logs, r"^rank \d+: ")]
    notes += [line.strip() for line in lines_with(logs[:1], "setup: not eligible")]
    notes += tally(logs[0]).warnings[:2]
    if reference is not None:
        reference_codes, reference_logs = reference
        notes.append(f"NCCL alone (not judged): init returned after "
                     f"{_times(reference_codes[:last], reference_logs[:last])}")
    if first_call is not None:
        first_codes, first_logs = first_call
        notes.append(f"NCCL alone with a first all-reduce (not judged): exit {codes(first_codes)}")
        notes += [line.strip() for line in lines_matching(first_logs[:last], r"^rank \d+: first all-reduce returned")]
    return judged(conditions, f"exit {codes(returncodes)}; init returned after "
                              f"{_times(returncodes[:last], logs[:last])}", notes)
