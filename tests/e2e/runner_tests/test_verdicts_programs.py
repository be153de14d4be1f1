"""The verdicts on our own end-to-end programs' runs, on canned logs: each passes on a good
run and fails, naming the condition, when any one thing it checks goes wrong."""

import unittest

from runner_support import FAIL, PASS, SKIPPED, info, log, released, setup, warn
from e2e_runner import verdicts_programs as verdicts


def allreduce_log(rank, ranks, eligible=True, wrong=0):
    return log(setup(rank, ranks, eligible=eligible),
               f"rank {rank}/{ranks}: 156 checks, {wrong} wrong ({wrong * 3} elements)",
               released(rank, ranks, taken=(80, 16, 0, 0), forwarded=60,
                        reasons="too-large=48 empty=12"))


class AllreduceRanksTest(unittest.TestCase):
    def test_every_rank_right_and_eligible_passes(self):
        verdict = verdicts.allreduce_ranks(4, [0] * 4, [allreduce_log(r, 4) for r in range(4)])
        self.assertEqual(verdict.status, PASS)
        self.assertIn("4/4 ranks eligible, 384 calls taken", verdict.detail)
        self.assertEqual(verdict.notes[0], "rank 0/4: 156 checks, 0 wrong (0 elements)")
        self.assertIn("released: taken 1shot=80", verdict.notes[-1])

    def test_a_wrong_sum_fails(self):
        verdict = verdicts.allreduce_ranks(2, [0, 1], [allreduce_log(0, 2), allreduce_log(1, 2, wrong=1)])
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("not met: every rank exits 0", verdict.detail)

    def test_a_rank_that_forwards_fails(self):
        verdict = verdicts.allreduce_ranks(2, [0, 0], [allreduce_log(0, 2), allreduce_log(1, 2, eligible=False)])
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("1/2 ranks eligible", verdict.detail)
        self.assertIn("not met: 2 ranks eligible", verdict.detail)


class SetupFaultTest(unittest.TestCase):
    def logs(self, warned=True, forwarding=2):
        rank1 = [setup(1, 2, eligible=forwarding < 2, why="rank 1 cannot map the peers' buffers")]
        if warned:
            rank1.append(warn("comm 0x55d0 rank 1/2: rank 1 cannot map the peers' buffers", rank=1))
        return [log(setup(0, 2, eligible=False, why="rank 1 cannot map the peers' buffers")), log(*rank1)]

    def test_both_forward_with_a_warn_passes(self):
        verdict = verdicts.setup_fault([0, 0], self.logs())
        self.assertEqual(verdict.status, PASS)
        self.assertEqual(verdict.detail, "exit 0/0, 2/2 ranks forward, 1 WARN")
        self.assertEqual(len(verdict.notes), 1)

    def test_no_warn_fails(self):
        self.assertIn("not met: a WARN", verdicts.setup_fault([0, 0], self.logs(warned=False)).detail)

    def test_a_rank_taking_calls_fails(self):
        verdict = verdicts.setup_fault([0, 0], self.logs(forwarding=1))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("every rank forwards", verdict.detail)

    def test_a_wrong_result_fails(self):
        self.assertEqual(verdicts.setup_fault([0, 1], self.logs()).status, FAIL)


class AbortWatchdogTest(unittest.TestCase):
    def test_exit_code_decides_and_the_time_is_shown(self):
        text = log("rank 0: watchdog called ncclCommAbort -> 0",
                   "rank 0: stream returned (no error) 0.01 s after the abort")
        passed = verdicts.abort_watchdog(0, text)
        self.assertEqual((passed.status, passed.notes), (PASS, ["rank 0: stream returned (no error) 0.01 s after "
                                                                "the abort"]))
        self.assertEqual(verdicts.abort_watchdog(1, text).status, FAIL)
        self.assertEqual(verdicts.abort_watchdog(124, "").status, FAIL)


class SanitizerTest(unittest.TestCase):
    CLEAN = "========= ERROR SUMMARY: 0 errors"
    RACE_CLEAN = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"

    def logs(self, summary0, summary1, taken=(30, 0, 0, 0)):
        return [log("rank 0/2: 72 checks, 0 wrong (0 elements)", released(0, 2, taken=taken), summary0),
                log(released(1, 2, taken=taken), summary1)]

    def test_clean_tools_and_calls_taken_pass(self):
        self.assertEqual(verdicts.sanitizer([0, 0], self.logs(self.CLEAN, self.CLEAN)).status, PASS)
        verdict = verdicts.sanitizer([0, 0], self.logs(self.RACE_CLEAN, self.RACE_CLEAN))
        self.assertEqual(verdict.status, PASS)
        self.assertIn("rank 0 took 30 calls", verdict.detail)

    def test_errors_on_one_rank_fail(self):
        verdict = verdicts.sanitizer([0, 3], self.logs(self.CLEAN, "========= ERROR SUMMARY: 2 errors"))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("every rank's tool reports nothing", verdict.detail)
        self.assertIn("ERROR SUMMARY: 2 errors", verdict.detail)
        hazards = "========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warnings)"
        self.assertEqual(verdicts.sanitizer([0, 0], self.logs(self.RACE_CLEAN, hazards)).status, FAIL)

    def test_everything_forwarded_fails(self):
        # Clean, but our kernels never ran under the tool: nothing was checked.
        verdict = verdicts.sanitizer([0, 0], self.logs(self.CLEAN, self.CLEAN, taken=(0, 0, 0, 0)))
        self.assertIn("not met: rank 0 took calls", verdict.detail)


class RecoveryTest(unittest.TestCase):
    def test_each_scenario_needs_its_evidence_in_rank_0s_log(self):
        for scenario, evidence in verdicts.RECOVERY_EVIDENCE.items():
            with self.subTest(scenario=scenario):
                line = f"rank 0: {scenario}: PASS control back 1.02 s after the call"
                good = log(line, info(f"comm 0x55d0 rank 0/2 {evidence}"))
                self.assertEqual(verdicts.recovery(scenario, [0, 0], good).status, PASS)
                self.assertIn(line, verdicts.recovery(scenario, [0, 0], good).detail)
                self.assertEqual(verdicts.recovery(scenario, [0, 0], log(line)).status, FAIL)
                self.assertEqual(verdicts.recovery(scenario, [0, 1], good).status, FAIL)

    def test_the_revoke_evidence_is_the_released_line(self):
        line = released(0, 2, taken=(0, 0, 0, 0), nbytes=262144, forwarded=1, reasons="ineligible-comm=1")
        self.assertEqual(verdicts.recovery("revoke", [0, 0], log(line)).status, PASS)

    def test_a_nccl_without_the_call_skips(self):
        text = log("rank 0: shrink-abort: SKIPPED (NCCL 22703 lacks the call; 22800 needed)")
        verdict = verdicts.recovery("shrink-abort", [77, 0], text)
        self.assertEqual(verdict.status, SKIPPED)
        self.assertIn("lacks the call", verdict.detail)


class ReleaseTest(unittest.TestCase):
    WAITED = "buffers freed once every peer had let go of them"
    KEPT = "buffers kept allocated: 1 peer rank(s) still map them"
    FREED = "buffers kept at release freed"

    def test_processes_counts_each_event_on_rank_0(self):
        rank0 = log(info(self.WAITED), info(self.KEPT), info(self.KEPT), info(self.FREED), info(self.FREED),
                    "late destroy: PASS 1.01 s")
        self.assertEqual(verdicts.release_processes([0, 0], [rank0, ""]).status, PASS)
        # Rank 1's lines do not count for rank 0.
        short = log(info(self.WAITED), info(self.KEPT), info(self.FREED), info(self.FREED))
        verdict = verdicts.release_processes([0, 0], [short, log(info(self.KEPT, rank=1))])
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("rank 0 kept its block at least twice", verdict.detail)
        self.assertEqual(verdicts.release_processes([0, 2], [rank0, ""]).status, FAIL)

    def test_initall_needs_two_per_peer(self):
        ranks = 4
        enough = log(*[info("buffers kept allocated: 3 peer rank(s) still map them")] * 6, *[info(self.FREED)] * 6)
        self.assertEqual(verdicts.release_initall(ranks, 0, enough).status, PASS)
        fewer = log(*[info("buffers kept allocated: 3 peer rank(s) still map them")] * 5, *[info(self.FREED)] * 6)
        self.assertEqual(verdicts.release_initall(ranks, 0, fewer).status, FAIL)
        self.assertEqual(verdicts.release_initall(ranks, 1, enough).status, FAIL)

    def test_devices_must_all_be_refused_as_several_gpus_per_process(self):
        why = "the process of rank {} drives several GPUs and has peers in other processes"

        def refusals(rank, count):
            return [setup(rank, 4, comm=c, eligible=False, why=why.format(rank)) for c in range(count)]

        five = [log(*refusals(0, 3)), log(*refusals(2, 2))]
        self.assertEqual(verdicts.release_devices([0, 0], five).status, PASS)
        self.assertIn("more than 4 set-ups refused", verdicts.release_devices([0, 0], five[:1]).detail)
        taken = verdicts.release_devices([0, 0], five + [log(setup(1, 4))])
        self.assertIn("not met: no eligible set-up", taken.detail)
        other = [log(*[setup(0, 4, comm=c, eligible=False, why="ranks span 2 hosts") for c in range(6)])]
        self.assertEqual(verdicts.release_devices([0, 0], other).status, FAIL)
        self.assertEqual(verdicts.release_devices([0, 1], five).status, FAIL)


class NoNvmlTest(unittest.TestCase):
    def test_every_rank_forwards_and_a_warn_names_nvml(self):
        why = "NVLink between the GPUs cannot be confirmed"
        logs = [log(setup(r, 3, eligible=False, why=why)) for r in range(3)]
        logs[1] += log(warn("cannot load NVML (libnvidia-ml.so.1): NVLink is not known", rank=1))
        self.assertEqual(verdicts.no_nvml([0, 0, 0], logs).status, PASS)
        other_warn = [text.replace("cannot load NVML", "NVML says no") for text in logs]
        self.assertIn("a WARN naming NVML", verdicts.no_nvml([0, 0, 0], other_warn).detail)
        self.assertEqual(verdicts.no_nvml([0, 0, 0], logs[:2] + [log(setup(2, 3))]).status, FAIL)


class CyclesTest(unittest.TestCase):
    def logs(self, cycles, kernel_of=lambda cycle: (1, 0, 0, 0)):
        total = cycles + verdicts.CYCLES_WARM_UP
        return [log(*[released(rank, 2, comm=cycle, taken=kernel_of(cycle)) for cycle in range(total)],
                    f"rank {rank}: {cycles} cycles, 0 wrong elements, device memory +0.0 MiB, fds +0, mappings +0")
                for rank in (0, 1)]

    def test_every_child_taking_its_one_call_by_a_push_kernel_passes(self):
        mixed = self.logs(10, kernel_of=lambda cycle: (1, 0, 0, 0) if cycle % 2 else (0, 1, 0, 0))
        verdict = verdicts.cycles(10, [0, 0], mixed)
        self.assertEqual(verdict.status, PASS)
        self.assertIn("30 of 30 child communicators", verdict.detail)

    def test_a_child_that_forwarded_or_took_more_fails(self):
        for odd in ((0, 0, 0, 0), (0, 0, 1, 0), (1, 1, 0, 0)):
            with self.subTest(taken=odd):
                logs = self.logs(10, kernel_of=lambda cycle, odd=odd: odd if cycle == 7 else (1, 0, 0, 0))
                self.assertEqual(verdicts.cycles(10, [0, 0], logs).status, FAIL)

    def test_a_leak_fails_through_the_exit_code(self):
        self.assertEqual(verdicts.cycles(10, [1, 0], self.logs(10)).status, FAIL)


if __name__ == "__main__":
    unittest.main()
