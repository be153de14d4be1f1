"""The verdicts on nccl-tests, PyTorch, ctypes and JAX runs, on canned logs."""

import unittest

from runner_support import FAIL, PASS, info, log, released, setup
from e2e_runner import verdicts_frameworks as verdicts
from e2e_runner.launch import TIMED_OUT

ROW = ("{size:>12} {count:>13}  bfloat16     sum      -1    11.07    0.74    0.74  {wrong_out:>6}"
       "    10.88    0.75    0.75  {wrong_in:>6}")


def perf_log(rows=((1024, 0, 0), (4096, 0, 0)), bounds="0 OK", ranks=2, eligible=2, exit_line=True):
    """all_reduce_perf -c 1 under mpirun --tag-output, with the library's lines of every rank."""
    lines = ["# nccl-tests version 2.17.1 nccl-headers=22809 nccl-library=22809",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
             "busbw #wrong"]
    lines += [f"[1,{rank}]<stderr>:" + setup(rank, ranks, eligible=rank < eligible) for rank in range(ranks)]
    lines += [ROW.format(size=size, count=size // 2, wrong_out=out, wrong_in=inside) for size, out, inside in rows]
    lines += [f"[1,{rank}]<stderr>:" + released(rank, ranks, taken=(20, 4, 0, 0)) for rank in range(ranks)]
    if bounds:
        lines.append(f"# Out of bounds values : {bounds}")
    if exit_line:
        lines.append("# Avg bus bandwidth    : 0.552951")
    return log(*lines)


class NcclTestsTest(unittest.TestCase):
    def test_a_clean_run_passes(self):
        verdict = verdicts.nccl_tests(0, perf_log(), min_eligible=2)
        self.assertEqual(verdict.status, PASS)
        self.assertEqual(verdict.detail, "exit 0, 2 sizes, #wrong 0, 2 communicator ranks eligible, 48 calls taken")

    def test_a_wrong_element_in_either_column_fails(self):
        for rows in (((1024, 0, 0), (4096, 2, 0)), ((1024, 0, 1), (4096, 0, 0))):
            with self.subTest(rows=rows):
                verdict = verdicts.nccl_tests(0, perf_log(rows=rows))
                self.assertEqual(verdict.status, FAIL)
                self.assertIn("#wrong 0", verdict.detail.split("not met:")[1])

    def test_the_bounds_line_must_say_0_ok(self):
        self.assertIn("Out of bounds values", verdicts.nccl_tests(0, perf_log(bounds="2 FAILED")).detail)
        self.assertEqual(verdicts.nccl_tests(0, perf_log(bounds=None)).status, FAIL)

    def test_no_table_fails_even_with_exit_0(self):
        verdict = verdicts.nccl_tests(0, log("gpu-node: Test NCCL failure common.cu:1005 'unhandled cuda error'"))
        self.assertIn("a table of results", verdict.detail)

    def test_exit_code_and_eligible_ranks_count(self):
        self.assertEqual(verdicts.nccl_tests(1, perf_log()).status, FAIL)
        self.assertEqual(verdicts.nccl_tests(TIMED_OUT, perf_log()).status, FAIL)
        few = verdicts.nccl_tests(0, perf_log(ranks=4, eligible=3), min_eligible=4)
        self.assertIn("not met: at least 4 eligible", few.detail)
        # Without a minimum (several GPUs), eligibility is reported, not required.
        self.assertEqual(verdicts.nccl_tests(0, perf_log(ranks=4, eligible=3)).status, PASS)


def torch_log(ranks, passing=None, taken=(10, 2, 0, 0)):
    passing = ranks if passing is None else passing
    lines = []
    for rank in range(ranks):
        lines += [setup(rank, ranks), f"rank {rank}/{ranks} phase eager: PASS",
                  f"rank {rank}/{ranks} phase graph: {'PASS' if rank < passing else 'FAIL'}",
                  released(rank, ranks, taken=taken),
                  f"rank {rank}/{ranks}: {'PASS' if rank < passing else 'FAIL [graph]'}"]
    return log(*lines)


class TorchTest(unittest.TestCase):
    def test_every_rank_passing_with_calls_taken_passes(self):
        verdict = verdicts.torch_ranks(4, 0, torch_log(4))
        self.assertEqual(verdict.status, PASS)
        self.assertIn("4/4 ranks passed, 4 communicators eligible, 48 calls taken", verdict.detail)

    def test_a_failing_phase_fails_and_is_shown(self):
        verdict = verdicts.torch_ranks(4, 1, torch_log(4, passing=3))
        self.assertEqual(verdict.status, FAIL)
        self.assertEqual(verdict.notes, ["rank 3/4 phase graph: FAIL"])

    def test_lines_of_another_world_size_do_not_count(self):
        self.assertEqual(verdicts.torch_ranks(4, 0, torch_log(2) + torch_log(2)).status, FAIL)

    def test_nothing_taken_fails_on_the_rig_only(self):
        untouched = torch_log(2, taken=(0, 0, 0, 0))
        self.assertIn("calls taken", verdicts.torch_ranks(2, 0, untouched).detail.split("not met:")[1])
        self.assertEqual(verdicts.torch_ranks(2, 0, untouched, calls_taken=False).status, PASS)


class TorchWatchdogAbortTest(unittest.TestCase):
    GOOD = log("rank 0: first all_reduce done", "rank 1: first all_reduce done",
               "[rank0]:[E ProcessGroupNCCL.cpp:632] Watchdog caught collective operation timeout: WorkNCCL(...)",
               info("comm 0x55d0 rank 0/2 ncclCommAbort: our kernels told to stop"),
               "torch.distributed.elastic.multiprocessing.errors.ChildFailedError")

    def test_a_timely_failure_through_our_hook_passes(self):
        verdict = verdicts.torch_watchdog_abort(1, 19.4, self.GOOD, TIMED_OUT)
        self.assertEqual(verdict.status, PASS)
        self.assertIn("ended after 19 s with exit 1", verdict.detail)

    def test_each_condition_fails_alone(self):
        self.assertIn("the job fails", verdicts.torch_watchdog_abort(0, 19, self.GOOD, TIMED_OUT).detail)
        self.assertIn("not by our time limit",
                      verdicts.torch_watchdog_abort(TIMED_OUT, 60, self.GOOD, TIMED_OUT).detail)
        self.assertIn("ends within 50 s", verdicts.torch_watchdog_abort(1, 55, self.GOOD, TIMED_OUT).detail)
        no_error = self.GOOD.replace("Watchdog caught collective operation timeout", "something")
        self.assertIn("a timeout error reported", verdicts.torch_watchdog_abort(1, 19, no_error, TIMED_OUT).detail)
        not_ours = self.GOOD.replace("our kernels told to stop", "nothing of ours")
        self.assertIn("our abort hook stopped a kernel",
                      verdicts.torch_watchdog_abort(1, 19, not_ours, TIMED_OUT).detail)

    def test_timed_out_matches_in_any_case(self):
        text = self.GOOD.replace("Watchdog caught collective operation timeout", "Operation Timed Out")
        self.assertEqual(verdicts.torch_watchdog_abort(1, 19, text, TIMED_OUT).status, PASS)


def ctypes_logs(ranks, eligible=True, taken=(45, 0, 0, 0), right=True, extra=""):
    return [log(extra, setup(rank, ranks, eligible=eligible) if eligible is not None else "",
                f"rank {rank}/{ranks}: {'PASS' if right else 'FAIL'} (19 checks, 0 wrong, NCCL from libnccl.so.2)",
                released(rank, ranks, taken=taken) if eligible is not None else "")
            for rank in range(ranks)]


class CtypesClientTest(unittest.TestCase):
    def test_audit_and_dropin_need_eligible_ranks_and_calls_taken(self):
        for mode in ("audit-name", "audit-path", "dropin-name"):
            with self.subTest(mode=mode):
                self.assertEqual(verdicts.ctypes_client(mode, 2, [0, 0], ctypes_logs(2)).status, PASS)
                self.assertEqual(verdicts.ctypes_client(mode, 2, [0, 0], ctypes_logs(2, eligible=False)).status, FAIL)
                untaken = ctypes_logs(2, taken=(0, 0, 0, 0))
                self.assertIn("calls taken", verdicts.ctypes_client(mode, 2, [0, 0], untaken).detail)
                self.assertEqual(verdicts.ctypes_client(mode, 2, [0, 0], ctypes_logs(2, right=False)).status, FAIL)

    def test_the_tool_must_have_chosen_audit(self):
        chosen = ctypes_logs(2, extra="nccl-car run: mode audit: the script uses ctypes and names NCCL")
        self.assertEqual(verdicts.ctypes_client("tool-auto", 2, [0, 0], chosen).status, PASS)
        self.assertIn("nccl-car run chose mode audit", verdicts.ctypes_client("tool-auto", 2, [0, 0],
                                                                              ctypes_logs(2)).detail)

    def test_preload_must_not_reach_the_client(self):
        unreached = ctypes_logs(2, eligible=None)
        self.assertEqual(verdicts.ctypes_client("preload", 2, [0, 0], unreached).status, PASS)
        reached = verdicts.ctypes_client("preload", 2, [0, 0], ctypes_logs(2))
        self.assertIn("not met: no communicator set up", reached.detail)


def traced(rank):
    return f"gpu-node:1000:1000 [{rank}] NCCL-CAR TRACE rank {rank} all-reduce 4096 x fp32 (16384 bytes) -> 1shot"


class JaxTest(unittest.TestCase):
    AUTO = log("nccl-car run: mode audit: the script imports jax (--mode chooses another)",
               setup(0, 2), setup(1, 2, comm=0x66),
               *[traced(rank) for rank in (0, 1) for _ in range(70)],
               "jax psum 2 devices: PASS (105 checks, 0 wrong; jax 0.11.2)",
               "nccl-car: 1 process(es); 1 communicator(s), 2 communicator rank(s) set up: 2 eligible, 0 not eligible")
    PRELOAD = log("jax psum 2 devices: PASS (105 checks, 0 wrong; jax 0.11.2)",
                  "nccl-car: no communicator reached the library: it was preloaded, but no NCCL call reached it",
                  "  try: --mode audit")

    def test_auto_passes_with_audit_chosen_and_calls_taken(self):
        verdict = verdicts.jax_through_tool(0, self.AUTO)
        self.assertEqual(verdict.status, PASS)
        self.assertIn("2 eligible, 140 calls taken; jax psum 2 devices: PASS", verdict.detail)
        preloaded = self.AUTO.replace("mode audit", "mode preload")
        self.assertIn("mode audit chosen", verdicts.jax_through_tool(0, preloaded).detail)
        wrong = self.AUTO.replace("devices: PASS", "devices: FAIL")
        self.assertIn("every device's sums right", verdicts.jax_through_tool(1, wrong).detail)

    def test_auto_without_our_kernels_fails(self):
        untouched = "\n".join(line for line in self.AUTO.splitlines() if "NCCL-CAR" not in line)
        verdict = verdicts.jax_through_tool(0, untouched)
        self.assertIn("communicators eligible, calls taken", verdict.detail)

    def test_preload_must_say_it_was_not_reached(self):
        self.assertEqual(verdicts.jax_preloaded(0, self.PRELOAD).status, PASS)
        self.assertEqual(verdicts.jax_preloaded(0, self.PRELOAD.replace("  try: --mode audit", "")).status, FAIL)
        self.assertEqual(verdicts.jax_preloaded(0, self.PRELOAD.replace("no communicator", "a communicator")).status,
                         FAIL)
        self.assertEqual(verdicts.jax_preloaded(1, self.PRELOAD).status, FAIL)


if __name__ == "__main__":
    unittest.main()
