"""The verdicts on setup_order_e2e's runs, on canned logs: each passes on a good run and
fails, naming the condition, when any one thing it checks goes wrong."""

import unittest

from runner_support import FAIL, PASS, info, log, released, setup, warn
from e2e_runner import verdicts_setup as verdicts

# The two communicators' handles in every rank's process.
COMM_A, COMM_B = 0x55d0, 0x66d0


def order_log(rank, ranks, sums=("right", "right"), eligible=(1, 1), taken=(180, 180), reasons="comm-not-ready=1",
              warned=False, released_lines=True):
    """opposite-order's rank: A and B each set up eligible `eligible` times (0: not eligible),
    its 201 all-reduces taken but for those `reasons` forwards."""
    forwarded = sum(int(pair.split("=")[1]) for pair in reasons.split())
    first = "A then B" if rank % 2 == 0 else "B then A"
    lines = []
    for comm, times in zip((COMM_A, COMM_B), eligible):
        lines += [setup(rank, ranks, comm=comm).replace("from call 0", "from call 1")] * times
        if times == 0:
            why = "the ranks did not agree on a first call within NCCL_CAR_SETUP_TIMEOUT_MS (60000 ms)"
            lines.append(setup(rank, ranks, comm=comm, eligible=False, why=why))
    lines.append(f"rank {rank}: first all-reduces ({first}) done after 0.412 s")
    if warned:
        lines.append(warn(f"comm 0x55d0 rank {rank}/{ranks}: the set-up did not complete", rank=rank))
    lines += [f"rank {rank} comm {name}: sums {state}" + (" (201 all-reduces, 1 KiB to 1 MiB)" if state == "right"
                                                           else ": all-reduce 7 (4000 bytes): element 3 is 1, not 3")
              for name, state in zip(("A", "B"), sums)]
    if released_lines:
        lines += [released(rank, ranks, comm=comm, taken=(count, 0, 0, 0), forwarded=forwarded, reasons=reasons)
                  for comm, count in zip((COMM_A, COMM_B), taken)]
    return log(*lines)


class OppositeOrderTest(unittest.TestCase):
    def test_both_communicators_set_up_once_and_taken_on_every_rank_passes(self):
        for ranks in (2, 4):
            with self.subTest(ranks=ranks):
                verdict = verdicts.opposite_order(ranks, [0] * ranks, [order_log(r, ranks) for r in range(ranks)])
                self.assertEqual(verdict.status, PASS, verdict.detail)
                self.assertEqual(verdict.detail, f"exit {'/'.join(['0'] * ranks)}, {2 * ranks} of {2 * ranks} "
                                                 f"communicator ranks eligible, {360 * ranks} calls taken, {2 * ranks} "
                                                 f"forwarded (comm-not-ready={2 * ranks})")
                self.assertIn("rank 1: first all-reduces (B then A) done after 0.412 s", verdict.notes)

    def test_a_hang_fails(self):
        # Before the change: each rank waits inside its first all-reduce until the runner's
        # limit ends it, having printed nothing of its own and released nothing.
        hung = [log(setup(r, 2, comm=COMM_A) if r == 0 else setup(r, 2, comm=COMM_B)) for r in range(2)]
        verdict = verdicts.opposite_order(2, [124, 124], hung)
        self.assertEqual(verdict.status, FAIL)
        unmet = verdict.detail.split("not met:")[1]
        for condition in ("every rank exits 0", "every rank's sums right on both communicators",
                          "every rank sets up each communicator eligible exactly once",
                          "every communicator's released: line counts calls taken"):
            self.assertIn(condition, unmet)
        self.assertTrue(verdict.detail.startswith("exit 124/124, 2 of 4 communicator ranks eligible"))

    def test_the_watchdog_ending_a_rank_fails(self):
        logs = [order_log(0, 2), log(setup(1, 2, comm=COMM_B),
                                     "rank 1: FAIL: first all-reduces (B then A) not done within 60 s")]
        verdict = verdicts.opposite_order(2, [0, 1], logs)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("rank 1: FAIL: first all-reduces (B then A) not done within 60 s", verdict.notes)

    def test_a_wrong_sum_fails(self):
        logs = [order_log(0, 2), order_log(1, 2, sums=("right", "WRONG"))]
        verdict = verdicts.opposite_order(2, [0, 1], logs)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("every rank's sums right on both communicators", verdict.detail.split("not met:")[1])

    def test_a_missing_or_repeated_eligible_line_fails(self):
        for eligible in ((1, 0), (2, 1), (0, 0)):
            with self.subTest(eligible=eligible):
                logs = [order_log(0, 2), order_log(1, 2, eligible=eligible)]
                verdict = verdicts.opposite_order(2, [0, 0], logs)
                self.assertEqual(verdict.status, FAIL)
                self.assertIn("every rank sets up each communicator eligible exactly once",
                              verdict.detail.split("not met: ")[1])

    def test_a_warn_fails(self):
        verdict = verdicts.opposite_order(2, [0, 0], [order_log(0, 2), order_log(1, 2, warned=True)])
        self.assertEqual(verdict.status, FAIL)
        self.assertEqual(verdict.detail.split("not met: ")[1], "no NCCL-CAR WARN")
        self.assertTrue(any("the set-up did not complete" in note for note in verdict.notes))

    def test_a_communicator_that_took_nothing_fails(self):
        logs = [order_log(0, 2, taken=(180, 0), reasons="comm-not-ready=201"), order_log(1, 2)]
        verdict = verdicts.opposite_order(2, [0, 0], logs)
        self.assertEqual(verdict.status, FAIL)
        self.assertEqual(verdict.detail.split("not met: ")[1], "every communicator's released: line counts calls taken")

    def test_a_communicator_never_released_fails(self):
        verdict = verdicts.opposite_order(2, [0, 0], [order_log(0, 2), order_log(1, 2, released_lines=False)])
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("every communicator's released: line counts calls taken", verdict.detail)

    def test_calls_forwarded_for_another_reason_fail(self):
        for reasons in ("comm-not-ready=1 ineligible-comm=20", "comm-not-ready=1 too-large=2 failed=1"):
            with self.subTest(reasons=reasons):
                verdict = verdicts.opposite_order(2, [0, 0], [order_log(0, 2, reasons=reasons), order_log(1, 2)])
                self.assertEqual(verdict.status, FAIL)
                self.assertIn("no call forwarded but comm-not-ready or too-large", verdict.detail)

    def test_too_large_forwards_are_allowed(self):
        logs = [order_log(r, 2, reasons="comm-not-ready=2 too-large=1") for r in range(2)]
        self.assertEqual(verdicts.opposite_order(2, [0, 0], logs).status, PASS)


GAVE_UP = ("the set-up did not complete within NCCL_CAR_SETUP_TIMEOUT_MS (5000 ms), waiting for the exchange of "
           "records (some rank has not made it)")


def survivor_log(rank, seconds=5.43, result=0, warned=True, timeout_ms=5000, why=GAVE_UP, said=True):
    """dead-peer's surviving rank of 3: the library's WARN and setup: line, the program's lines."""
    lines = []
    if warned:
        lines.append(warn(f"comm 0x55d0 rank {rank}/3: "
                          f"{GAVE_UP.replace('(5000 ms)', f'({timeout_ms} ms)')}; all-reduces go to NCCL", rank=rank))
    if why is not None:
        lines.append(info(f"comm 0x55d0 rank {rank}/3 setup: not eligible: {why}", rank=rank))
    if said:
        lines += [f"rank {rank}: init returned {result} after {seconds:.2f} s",
                  f"rank {rank}: abort returned 0 after 0.31 s"]
    return log(*lines)


LEAVER = log("rank 2: NCCL's own init (pncclCommInitRank) returned 0; leaving without destroying it")


def nccl_alone(seconds=(0.81, 0.79)):
    return [0, 0, 0], [log(f"rank {r}: init returned 0 after {s:.2f} s") for r, s in enumerate(seconds)] + [LEAVER]


class DeadPeerTest(unittest.TestCase):
    def test_returning_after_the_bound_with_its_warn_passes(self):
        logs = [survivor_log(0), survivor_log(1, seconds=5.61), LEAVER]
        verdict = verdicts.dead_peer(3, [0, 0, 0], logs, reference=nccl_alone())
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertEqual(verdict.detail, "exit 0/0/0; init returned after rank 0 5.43 s, rank 1 5.61 s")
        self.assertIn("NCCL alone (not judged): init returned after rank 0 0.81 s, rank 1 0.79 s", verdict.notes)
        self.assertIn("rank 2: NCCL's own init (pncclCommInitRank) returned 0; leaving without destroying it",
                      verdict.notes)

    def test_the_reference_is_only_shown(self):
        logs = [survivor_log(0), survivor_log(1), LEAVER]
        hung = ([124, 124, 0], [log(), log(), LEAVER])
        verdict = verdicts.dead_peer(3, [0, 0, 0], logs, reference=hung)
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("NCCL alone (not judged): init returned after rank 0 never (exit 124), rank 1 never (exit 124)",
                      verdict.notes)

    def test_a_creating_call_that_never_returns_fails(self):
        logs = [log(), survivor_log(1), LEAVER]
        verdict = verdicts.dead_peer(3, [124, 0, 0], logs)
        self.assertEqual(verdict.status, FAIL)
        self.assertEqual(verdict.detail.split("; not met: ")[0], "exit 124/0/0; init returned after rank 0 never "
                                                                 "(exit 124), rank 1 5.43 s")
        unmet = verdict.detail.split("not met:")[1]
        for condition in ("every surviving rank exits 0", "init returned ncclSuccess after 4 to 30 s",
                          "every surviving rank WARNs", "not eligible for it"):
            self.assertIn(condition, unmet)

    def test_returning_too_early_or_too_late_fails(self):
        # Too early: our set-up never waited for the bound (or never ran); too late: not bounded by it.
        for seconds in (0.9, 3.5, 31.0):
            with self.subTest(seconds=seconds):
                logs = [survivor_log(0, seconds=seconds), survivor_log(1), LEAVER]
                verdict = verdicts.dead_peer(3, [0, 0, 0], logs)
                self.assertEqual(verdict.status, FAIL)
                self.assertEqual(verdict.detail.split("not met: ")[1],
                                 "every surviving rank's init returned ncclSuccess after 4 to 30 s")

    def test_an_init_that_returned_an_error_fails(self):
        logs = [survivor_log(0, result=6), survivor_log(1), LEAVER]
        verdict = verdicts.dead_peer(3, [1, 0, 0], logs)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("rank 0 5.43 s (result 6)", verdict.detail)
        self.assertIn("init returned ncclSuccess", verdict.detail.split("not met:")[1])

    def test_a_missing_warn_or_another_bound_fails(self):
        for changed in ({"warned": False}, {"timeout_ms": 60000}):
            with self.subTest(changed=changed):
                logs = [survivor_log(0), survivor_log(1, **changed), LEAVER]
                verdict = verdicts.dead_peer(3, [0, 0, 0], logs)
                self.assertEqual(verdict.status, FAIL)
                self.assertEqual(verdict.detail.split("not met: ")[1], "every surviving rank WARNs 'the set-up did "
                                                                       "not complete within NCCL_CAR_SETUP_TIMEOUT_MS "
                                                                       "(5000 ms)'")

    def test_not_eligible_for_another_reason_or_not_at_all_fails(self):
        for why in (None, "the set-up's group failed: remote process exited or there was a network error"):
            with self.subTest(why=why):
                logs = [survivor_log(0), survivor_log(1, why=why), LEAVER]
                verdict = verdicts.dead_peer(3, [0, 0, 0], logs)
                self.assertEqual(verdict.status, FAIL)
                self.assertEqual(verdict.detail.split("not met: ")[1],
                                 "every surviving rank's communicator not eligible for it")

    def test_under_lazy_connections_nccl_bounds_the_wait_and_any_not_eligible_reason_does(self):
        # NCCL connects to the dead peer inside our exchange and gives up itself.
        group_failed = "the set-up's group failed: remote process exited or there was a network error"
        logs = [survivor_log(0, seconds=59.89, why=group_failed), survivor_log(1, seconds=59.88, why=group_failed),
                LEAVER]
        verdict = verdicts.dead_peer(3, [0, 0, 0], logs, lazy_connect=True)
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertEqual(verdicts.dead_peer(3, [0, 0, 0], logs).status, FAIL)  # not within our bound
        for changed in ({"seconds": 81.0}, {"warned": False}, {"why": None}):
            with self.subTest(changed=changed):
                logs = [survivor_log(0, seconds=59.9, why=group_failed), survivor_log(1, **changed), LEAVER]
                self.assertEqual(verdicts.dead_peer(3, [0, 0, 0], logs, lazy_connect=True).status, FAIL)

    def test_a_leaver_that_set_up_ours_or_never_made_its_communicator_fails(self):
        ours = log(setup(2, 3), LEAVER)
        verdict = verdicts.dead_peer(3, [0, 0, 0], [survivor_log(0), survivor_log(1), ours])
        self.assertEqual(verdict.detail.split("not met: ")[1], "rank 2 set up nothing of ours")
        failed = log("rank 2: NCCL's own init (pncclCommInitRank) returned 2; leaving without destroying it")
        verdict = verdicts.dead_peer(3, [0, 0, 1], [survivor_log(0), survivor_log(1), failed])
        self.assertEqual(verdict.detail.split("not met: ")[1], "rank 2 made NCCL's own communicator and left")


if __name__ == "__main__":
    unittest.main()
