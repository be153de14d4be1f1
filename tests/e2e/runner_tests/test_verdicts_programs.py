"""The verdicts on our own end-to-end programs' runs, on canned logs: each passes on a good
run and fails, naming the condition, when any one thing it checks goes wrong."""

import unittest

from runner_support import FAIL, PASS, SKIPPED, info, log, released, setup, warn
from e2e_runner import verdicts_programs as verdicts
from e2e_runner.verdict import tally


def allreduce_log(rank, ranks, eligible=True, wrong=0, taken=(100, 20, 12, 0), forwarded=24, reasons="too-large=24"):
    """allreduce_e2e's rank: 156 checks, the 24 above 8 MiB forwarded, the 132 others taken."""
    return log(setup(rank, ranks, eligible=eligible),
               f"rank {rank}/{ranks}: 156 checks (24 above 8388608 bytes), {wrong} wrong ({wrong * 3} elements)",
               released(rank, ranks, taken=taken, forwarded=forwarded, reasons=reasons))


class AllreduceRanksTest(unittest.TestCase):
    def test_every_rank_right_and_eligible_passes(self):
        verdict = verdicts.allreduce_ranks(4, [0] * 4, [allreduce_log(r, 4) for r in range(4)])
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("4/4 ranks eligible, 528 of 528 calls taken, 96 forwarded (too-large=96)", verdict.detail)
        self.assertEqual(verdict.notes[0], "rank 0/4: 156 checks (24 above 8388608 bytes), 0 wrong (0 elements)")
        self.assertIn("released: taken 1shot=100", verdict.notes[4])

    def test_a_wrong_sum_fails(self):
        verdict = verdicts.allreduce_ranks(2, [0, 1], [allreduce_log(0, 2), allreduce_log(1, 2, wrong=1)])
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("not met: every rank exits 0", verdict.detail)

    def test_a_rank_that_forwards_fails(self):
        refused = allreduce_log(1, 2, eligible=False, taken=(0, 0, 0, 0), forwarded=156, reasons="ineligible-comm=156")
        verdict = verdicts.allreduce_ranks(2, [0, 0], [allreduce_log(0, 2), refused])
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("1/2 ranks eligible", verdict.detail)
        self.assertIn("not met: 2 ranks eligible", verdict.detail)

    def test_a_run_with_every_call_forwarded_fails(self):
        # Every rank eligible and every sum right, but NCCL did all the work: all the
        # verdict used to ask (exit codes, eligible ranks) holds, and acceleration did not.
        logs = [allreduce_log(r, 2, taken=(0, 0, 0, 0), forwarded=156, reasons="too-large=156") for r in range(2)]
        self.assertEqual(tally(*logs).eligible, 2)
        verdict = verdicts.allreduce_ranks(2, [0, 0], logs)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("not met: calls taken, all 264 calls up to the limit taken, all 48 calls above it forwarded "
                      "as too-large", verdict.detail)

    def test_one_call_up_to_the_limit_forwarded_fails(self):
        for reasons in ("too-large=25", "too-large=24 failed=1"):
            with self.subTest(reasons=reasons):
                logs = [allreduce_log(0, 2), allreduce_log(1, 2, taken=(100, 20, 11, 0), forwarded=25, reasons=reasons)]
                verdict = verdicts.allreduce_ranks(2, [0, 0], logs)
                self.assertEqual(verdict.status, FAIL)
                self.assertIn("all 264 calls up to the limit taken", verdict.detail.split("not met:")[1])

    def test_a_rank_without_its_summary_fails(self):
        logs = [allreduce_log(0, 2), allreduce_log(1, 2).replace("156 checks (24 above", "156 checks (of")]
        self.assertIn("not met: 2 ranks report their checks", verdicts.allreduce_ranks(2, [0, 0], logs).detail)


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


def abort_log(found="still running", returned="(no error) 0.01 s", taken=(0, 0, 1, 0), forwarded=0, reasons=""):
    """abort_e2e's rank 0: its watchdog's look at the stream, the library's lines, the time."""
    return log(setup(0, 2), f"rank 0: watchdog found the all-reduce {found}; ncclCommAbort -> 0",
               info("comm 0x55d0 rank 0/2 ncclCommAbort: our kernels told to stop"),
               released(0, 2, taken=taken, forwarded=forwarded, reasons=reasons),
               f"rank 0: stream returned {returned} after the abort")


class AbortWatchdogTest(unittest.TestCase):
    def test_our_kernel_stopped_by_the_abort_passes(self):
        passed = verdicts.abort_watchdog(0, abort_log())
        self.assertEqual(passed.status, PASS, passed.detail)
        self.assertIn("rank 0: stream returned (no error) 0.01 s after the abort", passed.notes)
        self.assertEqual(verdicts.abort_watchdog(1, abort_log()).status, FAIL)
        self.assertEqual(verdicts.abort_watchdog(124, "").status, FAIL)

    def test_nccls_own_abort_fails(self):
        # The all-reduce forwarded (or no library at all): NCCL's kernel waited and NCCL's
        # abort ended it. The old verdict read the exit code alone, 0 here.
        forwarded = abort_log(taken=(0, 0, 0, 0), forwarded=1, reasons="too-large=1")
        verdict = verdicts.abort_watchdog(0, forwarded)
        self.assertIn("not met: the all-reduce taken by our kernel, nothing forwarded", verdict.detail)
        without = "\n".join(line for line in abort_log().splitlines() if "NCCL-CAR" not in line)
        self.assertEqual(verdicts.abort_watchdog(0, without).status, FAIL)

    def test_a_return_before_the_abort_or_with_an_error_fails(self):
        # The old program exited 0 on any time below 5 s, a negative one too.
        early = verdicts.abort_watchdog(0, abort_log(returned="(no error) -0.98 s"))
        self.assertIn("not met: 0 to 5 s after the abort", early.detail)
        late = verdicts.abort_watchdog(0, abort_log(returned="(no error) 5.20 s"))
        self.assertIn("not met: 0 to 5 s after the abort", late.detail)
        error = verdicts.abort_watchdog(0, abort_log(returned="(unspecified launch failure) 0.01 s"))
        self.assertIn("not met: the stream returned without error", error.detail)

    def test_an_all_reduce_already_done_at_the_abort_fails(self):
        verdict = verdicts.abort_watchdog(0, abort_log(found="already finished"))
        self.assertIn("not met: its all-reduce still running at the abort", verdict.detail)


class SanitizerTest(unittest.TestCase):
    CLEAN = "========= ERROR SUMMARY: 0 errors"
    RACE_CLEAN = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"

    def logs(self, summary0, summary1, taken=(30, 0, 0, 0)):
        return [log("rank 0/2: 72 checks (0 above 8388608 bytes), 0 wrong (0 elements)", released(0, 2, taken=taken),
                    summary0),
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


def recovery_log(scenario, evidence=True, taken=1, forwards=None):
    """recovery_e2e SCENARIO's rank 0: its verdict line, the library's evidence and (where
    the communicator was set up) its released: line, by default as RECOVERY_FORWARDS says."""
    forwards = verdicts.RECOVERY_FORWARDS[scenario] if forwards is None else forwards
    lines = [f"rank 0: {scenario}: PASS control back 1.02 s after the call"]
    if evidence:
        lines.append(info(f"comm 0x55d0 rank 0/2 {verdicts.RECOVERY_EVIDENCE[scenario]}"))
    if verdicts.RECOVERY_FORWARDS[scenario] is not None:
        reasons = " ".join(f"{reason}={count}" for reason, count in forwards.items())
        lines.append(released(0, 2, taken=(taken, 0, 0, 0), nbytes=verdicts.RECOVERY_BYTES * taken,
                              forwarded=sum(forwards.values()), reasons=reasons))
    return log(*lines)


def judge_recovery(scenario, returncodes, log0, log1=None):
    """The verdict on recovery_e2e's two ranks; rank 1's log is rank 0's unless given."""
    return verdicts.recovery(scenario, returncodes, log0, log0 if log1 is None else log1)


class RecoveryTest(unittest.TestCase):
    def test_each_scenario_needs_its_evidence_in_rank_0s_log(self):
        for scenario in verdicts.RECOVERY_EVIDENCE:
            with self.subTest(scenario=scenario):
                verdict = judge_recovery(scenario, [0, 0], recovery_log(scenario))
                self.assertEqual(verdict.status, PASS, verdict.detail)
                self.assertIn(f"rank 0: {scenario}: PASS control back", verdict.detail)
                self.assertEqual(judge_recovery(scenario, [0, 0], recovery_log(scenario, evidence=False)).status,
                                 FAIL)
                self.assertEqual(judge_recovery(scenario, [0, 1], recovery_log(scenario)).status, FAIL)

    def test_an_all_reduce_that_was_not_ours_fails(self):
        # "our kernels told to stop" comes whenever the communicator has an engine, and the
        # old verdict asked for nothing else: with the blocked all-reduce forwarded (NCCL's
        # kernel waited, NCCL's part of the call ended it) it passed.
        for scenario, forwards in verdicts.RECOVERY_FORWARDS.items():
            if forwards is None:
                continue
            with self.subTest(scenario=scenario):
                text = recovery_log(scenario, taken=0, forwards={**forwards, "too-large": 1})
                self.assertIn(verdicts.RECOVERY_EVIDENCE[scenario], text)  # all the old verdict read
                verdict = judge_recovery(scenario, [0, 0], text)
                self.assertEqual(verdict.status, FAIL)
                wanted = ("rank 0's all-reduces taken by our kernel" if scenario in verdicts.RECOVERY_ANY_TAKEN
                          else f"rank 0's all-reduce of {verdicts.RECOVERY_BYTES} bytes taken by our kernel")
                self.assertIn(wanted, verdict.detail)

    def test_what_went_to_nccl_after_it_must_be_what_the_scenario_forwards(self):
        verdict = judge_recovery("shrink-abort", [0, 0], recovery_log("shrink-abort", forwards={"ineligible-comm": 1}))
        self.assertIn("not met: forwarded after it: none", verdict.detail)
        # async-error: calls made while the set-up ran go to NCCL as not ready, none for another reason.
        self.assertEqual(judge_recovery("async-error", [0, 0],
                                           recovery_log("async-error", taken=250, forwards={"comm-not-ready": 50})).status,
                         PASS)
        verdict = judge_recovery("async-error", [0, 0], recovery_log("async-error", forwards={"ineligible-comm": 1}))
        self.assertIn("not met: forwarded only while not ready", verdict.detail)

    def test_setup_abort_never_set_up_has_no_released_line(self):
        self.assertNotIn("released:", recovery_log("setup-abort"))
        self.assertEqual(judge_recovery("setup-abort", [0, 0], recovery_log("setup-abort")).status, PASS)

    def test_revoke_counts_nothing_nccl_refused_after_it(self):
        # The all-reduce after the revoke goes to NCCL, which refuses it: not counted.
        self.assertIn("(262144 bytes) forwarded 0", recovery_log("revoke"))
        line = released(0, 2, taken=(1, 0, 0, 0), nbytes=262144, forwarded=1, reasons="ineligible-comm=1")
        evidence = info(f"comm 0x55d0 rank 0/2 {verdicts.RECOVERY_EVIDENCE['revoke']}")
        verdict = judge_recovery("revoke", [0, 0], log(evidence, line))
        self.assertIn("not met: forwarded after it: none", verdict.detail)

    def test_async_error_needs_rank_1_to_count_as_rank_0_does(self):
        # Both ranks make the same calls: one that took its first call later disagreed.
        rank0 = recovery_log("async-error", taken=250, forwards={"comm-not-ready": 50})
        self.assertEqual(judge_recovery("async-error", [0, 0], rank0).status, PASS)
        rank1 = recovery_log("async-error", taken=249, forwards={"comm-not-ready": 51})
        verdict = judge_recovery("async-error", [0, 0], rank0, rank1)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("not met: rank 1 took and forwarded the same calls", verdict.detail)
        self.assertEqual(judge_recovery("async-error", [0, 0], rank0, "").status, FAIL)

    def test_a_nccl_without_the_call_skips(self):
        text = log("rank 0: shrink-abort: SKIPPED (NCCL 22703 lacks the call; 22800 needed)")
        verdict = judge_recovery("shrink-abort", [77, 0], text)
        self.assertEqual(verdict.status, SKIPPED)
        self.assertIn("lacks the call", verdict.detail)


class ReleaseTest(unittest.TestCase):
    WAITED = "buffers back in the pool once every peer had let go of them"
    KEPT = "buffers kept allocated: 1 peer rank(s) still map them"
    FREED = "buffers kept at release back in the pool"

    def rank_log(self, rank, *events, made=8, checked=7, wrong=0, taken=8, forwarded=0, reasons=""):
        """release_e2e processes' rank: its events, its released: lines (the parent's five
        4-byte calls, its children's three), its account of its all-reduces."""
        parent = min(taken, 5)
        children = [released(rank, 2, comm=0x100 + c, taken=(1 if c < taken - parent else 0, 0, 0, 0))
                    for c in range(3)]
        return log(*[info(event, rank=rank) for event in events], *children,
                   released(rank, 2, taken=(parent, 0, 0, 0), forwarded=forwarded, reasons=reasons),
                   f"rank {rank}: {made} all-reduces ({checked} checked), {wrong} wrong")

    def test_processes_counts_each_event_on_rank_0(self):
        rank0 = self.rank_log(0, self.WAITED, self.KEPT, self.KEPT, self.FREED, self.FREED)
        self.assertEqual(verdicts.release_processes([0, 0], [rank0, self.rank_log(1)]).status, PASS)
        # Rank 1's lines do not count for rank 0.
        short = self.rank_log(0, self.WAITED, self.KEPT, self.FREED, self.FREED)
        verdict = verdicts.release_processes([0, 0], [short, self.rank_log(1, self.KEPT)])
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("rank 0 kept its block at least twice", verdict.detail)
        self.assertEqual(verdicts.release_processes([0, 2], [rank0, self.rank_log(1)]).status, FAIL)

    def test_processes_whose_data_proves_nothing_fail(self):
        # The old program all-reduced zeros and printed no account: every line the old
        # verdict counted is here, and nothing shows that a sum was computed, or by whom.
        events = (self.WAITED, self.KEPT, self.KEPT, self.FREED, self.FREED)
        unaccounted = "\n".join(line for line in self.rank_log(0, *events).splitlines() if "all-reduces (" not in line)
        verdict = verdicts.release_processes([0, 0], [unaccounted, self.rank_log(1)])
        self.assertIn("not met: rank 0: its all-reduces counted", verdict.detail)
        wrong = verdicts.release_processes([0, 1], [self.rank_log(0, *events), self.rank_log(1, wrong=1)])
        self.assertIn("rank 1: every checked result right", wrong.detail)
        forwarded = self.rank_log(1, taken=0, forwarded=8, reasons="ineligible-comm=8")
        verdict = verdicts.release_processes([0, 0], [self.rank_log(0, *events), forwarded])
        self.assertIn("not met: rank 1: all 8 taken by our kernels, none forwarded", verdict.detail)

    def initall_log(self, ranks, kept, freed, made=7, checked=4, wrong=0, taken=7, forwarded=0):
        """release_e2e initall over `ranks` GPUs: the events, a released: line per rank and
        round (round 1 all ranks, round 2 all but the last), the program's account."""
        lines = [info(f"buffers kept allocated: {ranks - 1} peer rank(s) still map them")] * kept
        lines += [info(self.FREED)] * freed
        calls = [1] * ranks + [1] * (ranks - 1) + [0]
        taken_left = taken
        for round_rank, call in enumerate(calls):
            mine = min(call, taken_left)
            taken_left -= mine
            lines.append(released(round_rank % ranks, ranks, comm=0x200 + round_rank, taken=(mine, 0, 0, 0),
                                  forwarded=forwarded if round_rank == 0 else 0,
                                  reasons=f"too-large={forwarded}" if forwarded and round_rank == 0 else ""))
        lines.append(f"initall: {made} all-reduces ({checked} checked), {wrong} wrong")
        return log(*lines)

    def test_initall_needs_two_per_peer(self):
        ranks = 4
        self.assertEqual(verdicts.release_initall(ranks, 0, self.initall_log(ranks, 6, 6)).status, PASS)
        self.assertEqual(verdicts.release_initall(ranks, 0, self.initall_log(ranks, 5, 6)).status, FAIL)
        self.assertEqual(verdicts.release_initall(ranks, 1, self.initall_log(ranks, 6, 6)).status, FAIL)

    def test_initall_whose_data_proves_nothing_fails(self):
        ranks = 4
        unaccounted = "\n".join(line for line in self.initall_log(ranks, 6, 6).splitlines()
                                if "all-reduces (" not in line)
        self.assertIn("not met: its all-reduces counted", verdicts.release_initall(ranks, 0, unaccounted).detail)
        forwarded = verdicts.release_initall(ranks, 0, self.initall_log(ranks, 6, 6, taken=6, forwarded=1))
        self.assertIn("not met: all 7 taken by our kernels, none forwarded", forwarded.detail)
        wrong = verdicts.release_initall(ranks, 0, self.initall_log(ranks, 6, 6, wrong=1))
        self.assertIn("not met: every checked result right", wrong.detail)

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


def groups_log(rank, cases_failed=0, world_taken=6, split_taken=1, refused=1, case_lines=("outside a group: PASS",)):
    """groups_e2e's rank with the library: two communicators (the world and its split), the
    world's one refused call forwarded as 'type'."""
    return log(setup(rank, 2), setup(rank, 2, comm=0x77d0),
               *(f"rank {rank}: groups: {line} detail" for line in case_lines),
               f"rank {rank}: groups: 7 cases, {cases_failed} failed, 7 all-reduces expected taken",
               released(rank, 2, taken=(world_taken, 0, 0, 0), forwarded=refused,
                        reasons=f"type={refused}" if refused else ""),
               released(rank, 2, comm=0x77d0, taken=(split_taken, 0, 0, 0)))


def nccl_groups_log(rank, failed=0):
    return log(f"rank {rank}: groups: 7 cases, {failed} failed, 7 all-reduces expected taken")


class GroupsTest(unittest.TestCase):
    def verdict(self, library_logs, library_codes=(0, 0), nccl_codes=(0, 0)):
        return verdicts.groups(2, (list(library_codes), library_logs),
                               (list(nccl_codes), [nccl_groups_log(r) for r in range(2)]))

    def test_every_case_passing_with_the_expected_calls_taken_passes(self):
        verdict = self.verdict([groups_log(r) for r in range(2)])
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("14 of 14 calls taken", verdict.detail)

    def test_a_simulated_or_failed_group_that_ran_ours_fails(self):
        # Before the fix: the simulated and the failed groups' all-reduces ran our kernels.
        verdict = self.verdict([groups_log(r, cases_failed=2, world_taken=8) for r in range(2)], library_codes=(1, 1))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("every case passes", verdict.detail.split("not met:")[1])
        self.assertIn("exactly the 14 all-reduces expected taken", verdict.detail.split("not met:")[1])

    def test_calls_forwarded_instead_of_taken_fail(self):
        # Every case right, but a group's calls went to NCCL: right, and not what we claim.
        logs = [groups_log(r, world_taken=4, split_taken=0, refused=4) for r in range(2)]
        verdict = self.verdict(logs)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("at most 2 forwarded as type", verdict.detail)

    def test_a_program_nccl_alone_fails_is_no_reference(self):
        verdict = self.verdict([groups_log(r) for r in range(2)], nccl_codes=(1, 0))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("NCCL alone", verdict.detail.split("not met:")[1])


def creation_log(rank, stream, kind, split="with", init="with", destroy="with", taken=1):
    """creation_e2e's rank: the first communicator, its split and a second one, ours
    ('eligible'), refused at the first exchange ('ineligible') or without the library ('nccl')."""
    line = (f"rank {rank}: creation ({stream}): split returned {split} the kernel (0.061 s); init returned {init} "
            f"the kernel (0.420 s); sums right; destroy returned {destroy} the kernel (0.002 s)")
    comms = (0x55d0, 0x66d0, 0x77d0)
    if kind == "nccl":
        return log(line)
    if kind == "ineligible":
        why = "not eligible: NCCL_CAR_MAX_BLOCKS differs between rank 0 and rank 1"
        return log(*(info(f"comm {hex(comm)} rank {rank}/2 setup: {why}", rank) for comm in comms), line)
    return log(*(setup(rank, 2, comm=comm) for comm in comms), line,
               *(released(rank, 2, comm=comm, taken=(taken, 0, 0, 0)) for comm in comms))


class CreationTest(unittest.TestCase):
    def runs(self, **changed):
        """Every run as NCCL's own calls behave on the rig with NCCL 2.28.9 (split returns
        while the kernel spins, init waits), destroy returning while it spins, but for
        `changed`: kind-stream=(split, init, destroy)."""
        runs = {}
        for stream in ("user", "legacy"):
            for kind in ("nccl", "eligible", "ineligible"):
                split, init, destroy = changed.get(f"{kind}-{stream}", ("with", "after", "with"))
                runs[(kind, stream)] = ([0, 0], [creation_log(r, stream, kind, split, init, destroy)
                                                 for r in range(2)])
        return runs

    def test_ours_returning_wherever_nccls_do_passes(self):
        verdict = verdicts.creation(2, self.runs())
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("4 of 6 calls compared", verdict.detail)
        self.assertIn("user stream, init: NCCL alone waits for the kernel (not compared)", verdict.notes)

    def test_ours_waiting_where_nccl_does_not_fails(self):
        # Before the fix: an ineligible communicator freed its block with cudaFree, and an
        # eligible one prepared it on cudaStreamPerThread, which waits for the legacy stream.
        for changed in ({"ineligible-user": ("after", "after", "with")},
                        {"eligible-legacy": ("after", "after", "with")}):
            with self.subTest(changed=changed):
                verdict = verdicts.creation(2, self.runs(**changed))
                self.assertEqual(verdict.status, FAIL)
                self.assertIn("split returns while the kernel spins", verdict.detail.split("not met:")[1])

    def test_a_destroy_waiting_where_nccls_does_not_fails(self):
        # Before the fix: the release gave the block back with cudaFree, which waits for the
        # whole device.
        verdict = verdicts.creation(2, self.runs(**{"eligible-legacy": ("with", "after", "after")}))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("eligible, legacy stream: destroy returns while the kernel spins",
                      verdict.detail.split("not met:")[1])

    def test_a_destroy_nccl_itself_waits_in_is_not_compared(self):
        verdict = verdicts.creation(2, self.runs(**{"nccl-user": ("with", "after", "after"),
                                                    "eligible-user": ("with", "after", "after")}))
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("user stream, destroy: NCCL alone waits for the kernel (not compared)", verdict.notes)

    def test_nothing_compared_fails(self):
        waits = {f"nccl-{stream}": ("after", "after", "after") for stream in ("user", "legacy")}
        verdict = verdicts.creation(2, self.runs(**waits))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("NCCL alone returns from at least one creating call", verdict.detail)

    def test_calls_not_taken_on_an_eligible_run_fail(self):
        runs = self.runs()
        runs[("eligible", "user")] = ([0, 0], [creation_log(r, "user", "eligible", "with", "after", taken=0)
                                               for r in range(2)])
        verdict = verdicts.creation(2, runs)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("eligible, user stream: their all-reduces taken", verdict.detail)


class GpuMemoryBudgetTest(unittest.TestCase):
    def logs(self, refused_comms=(0x66d0, 0x77d0), taken=1):
        result = []
        for rank in range(2):
            lines = [setup(rank, 2)]
            for comm in refused_comms:
                lines.append(info(f"comm {hex(comm)} rank {rank}/2 setup: not eligible: rank 0 has no room for another "
                                  f"buffer block within its NCCL_CAR_GPU_MEMORY_BYTES", rank))
            lines.append(f"rank {rank}: creation (user): split returned with the kernel (0.1 s); init returned with "
                         f"the kernel (0.1 s); sums right; destroy returned with the kernel (0.1 s)")
            lines.append(released(rank, 2, taken=(taken, 0, 0, 0)))
            result.append(log(*lines))
        return result

    def test_the_first_ours_and_the_others_refused_passes(self):
        verdict = verdicts.gpu_memory_budget(2, [0, 0], self.logs())
        self.assertEqual(verdict.status, PASS, verdict.detail)

    def test_a_bound_not_kept_fails(self):
        verdict = verdicts.gpu_memory_budget(2, [0, 0], self.logs(refused_comms=(0x66d0,)))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("the other two refused for want of room", verdict.detail)


class GuestTest(unittest.TestCase):
    """guest_e2e: check-pointers and fork, as the library and the program print them."""

    @staticmethod
    def logs(scenario, taken=None, forwarded=None, child_says=True, releases=1):
        taken = verdicts.GUEST_TAKEN[scenario] if taken is None else taken
        reasons = verdicts.GUEST_FORWARDS[scenario] if forwarded is None else forwarded
        result = []
        for rank in range(2):
            lines = [setup(rank, 2), f"rank {rank}: {scenario}: PASS fine"]
            if scenario == "fork" and child_says:
                lines.append(info(f"process {2000 + rank} {verdicts.FORK_CHILD_EVIDENCE} (our buffers stay the "
                                  f"parent's)", rank))
            text = ", ".join(f"{reason}={count}" for reason, count in reasons.items())
            lines += [released(rank, 2, taken=(taken, 0, 0, 0), forwarded=sum(reasons.values()), reasons=text)
                      for _ in range(releases)]
            result.append(log(*lines))
        return result

    def test_each_scenario_as_it_should_be_passes(self):
        for scenario in verdicts.GUEST_TAKEN:
            with self.subTest(scenario):
                verdict = verdicts.guest(scenario, [0, 0], self.logs(scenario))
                self.assertEqual(verdict.status, PASS, verdict.detail)

    def test_a_host_buffer_call_taken_by_us_fails(self):
        verdict = verdicts.guest("check-pointers", [0, 0], self.logs("check-pointers", taken=3, forwarded={}))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("forwarded pointer-check=1", verdict.detail)

    def test_a_child_that_released_our_side_or_said_nothing_fails(self):
        self.assertEqual(verdicts.guest("fork", [0, 0], self.logs("fork", releases=2)).status, FAIL)
        self.assertEqual(verdicts.guest("fork", [0, 0], self.logs("fork", child_says=False)).status, FAIL)

    def test_a_rank_that_fails_fails(self):
        self.assertEqual(verdicts.guest("fork", [0, 1], self.logs("fork")).status, FAIL)


class NewerApiTest(unittest.TestCase):
    """newer_api_e2e: suspend and grow, as the library and the program print them."""

    @staticmethod
    def logs(scenario, taken=None, evidence=True, grown_eligible=True, codes_=None):
        taken = verdicts.NEWER_API_TAKEN[scenario] if taken is None else taken
        result = []
        for rank, count in enumerate(taken):
            lines = [f"rank {rank}: {scenario}: PASS fine"]
            if scenario == "suspend":
                lines.append(setup(rank, 2))
                if evidence:
                    lines.append(warn(f"comm 0x55d0 rank {rank}/2: {verdicts.SUSPEND_EVIDENCE}; its all-reduces "
                                      f"go to NCCL from now on", rank))
                lines.append(released(rank, 2, taken=(count, 0, 0, 0)))
            else:
                first = count - 2
                if first:
                    lines += [setup(rank, 2), released(rank, 2, taken=(first, 0, 0, 0))]
                lines += [setup(rank, 3, comm=0x66d0, eligible=grown_eligible),
                          released(rank, 3, comm=0x66d0, taken=(2, 0, 0, 0) if grown_eligible else (0, 0, 0, 0),
                                   forwarded=0 if grown_eligible else 2,
                                   reasons="" if grown_eligible else "ineligible-comm=2")]
            result.append(log(*lines))
        return result

    def test_each_scenario_as_it_should_be_passes(self):
        for scenario in verdicts.NEWER_API_TAKEN:
            with self.subTest(scenario):
                verdict = verdicts.newer_api(scenario, [0] * len(verdicts.NEWER_API_TAKEN[scenario]),
                                             self.logs(scenario))
                self.assertEqual(verdict.status, PASS, verdict.detail)

    def test_a_suspend_that_kept_our_side_fails(self):
        self.assertEqual(verdicts.newer_api("suspend", [0, 0], self.logs("suspend", evidence=False)).status, FAIL)

    def test_a_grown_communicator_not_ours_fails(self):
        verdict = verdicts.newer_api("grow", [0, 0, 0], self.logs("grow", grown_eligible=False))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("a 3-rank communicator set up eligible", verdict.detail)

    def test_an_nccl_without_the_functions_is_skipped(self):
        self.assertEqual(verdicts.newer_api("grow", [77, 77, 77], self.logs("grow")).status, SKIPPED)
