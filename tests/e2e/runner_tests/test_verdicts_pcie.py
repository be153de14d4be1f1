"""The verdicts on the PCIe case's rig runs, on canned logs: each passes on a good run and
fails, naming the condition, when any one thing it checks goes wrong."""

import unittest

from runner_support import FAIL, PASS, info, log, released
from e2e_runner import verdicts_pcie as verdicts

LINKS = "pcie (every pair peer-to-peer, PIX at most)"
UNTUNED = ("not eligible: pcie untuned (ipc peers, {links}, sm_90): every call goes to NCCL (untuned) until `nccl-car "
           "tune` has measured 2 ranks over PCIe on this machine")
TUNED_NOTE = "; pcie tuned: the choice table's rows for 2 ranks over PCIe decide; sizes they do not cover go to NCCL"


def setup(rank, note, links=LINKS):
    return info(f"comm 0x55d0 rank {rank}/2 setup: eligible (ipc peers, {links}, sm_90, up to 8388608 bytes; holds "
                f"50337280 bytes; from call 0){note}", rank=rank)


def untuned_setup(rank, links=LINKS):
    return info(f"comm 0x55d0 rank {rank}/2 setup: " + UNTUNED.format(links=links), rank=rank)


def checks(rank, wrong=0):
    return f"rank {rank}/2: 156 checks (24 above 8388608 bytes), {wrong} wrong ({wrong * 3} elements)"


def untuned_log(rank, setup_line=None, taken=(0, 0, 0, 0), reasons="untuned=156"):
    forwarded = sum(int(part.split("=")[1]) for part in reasons.split())
    return log(setup_line or untuned_setup(rank), checks(rank), released(rank, 2, taken=taken, forwarded=forwarded,
                                                                          reasons=reasons))


def trace(rank, nbytes, kernel, dtype="bf16"):
    element = 4 if dtype == "fp32" else 2
    return (f"gpu-node:{1000 + rank}:{1000 + rank} [0] NCCL-CAR TRACE rank {rank} all-reduce {nbytes // element} x "
            f"{dtype} sum ({nbytes} bytes) -> {kernel}")


ROWS = [{"collective": "all-reduce", "ranks": 2, "links": "pcie", "family": "half", "from": 0, "to": 4096,
         "winner": "1shot"},
        {"collective": "all-reduce", "ranks": 2, "links": "pcie", "family": "half", "from": 4097, "to": 8388608,
         "winner": "nccl"}]


def tuned_log(rank, traces=((16, "1shot"), (4096, "1shot")), reasons="tuned=20 untuned=110 too-large=24", wrong=0):
    forwarded = sum(int(part.split("=")[1]) for part in reasons.split())
    lines = [setup(rank, TUNED_NOTE), checks(rank, wrong)] + [trace(rank, b, k) for b, k in traces]
    return log(*lines, released(rank, 2, taken=(len(traces), 0, 0, 0), forwarded=forwarded, reasons=reasons))


class UntunedTest(unittest.TestCase):
    def test_every_call_forwarded_untuned_passes(self):
        verdict = verdicts.untuned(2, [0, 0], [untuned_log(0), untuned_log(1)])
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("2/2 ranks over PCIe (2 untuned), 0 calls taken, 312 forwarded", verdict.detail)

    def test_a_call_taken_fails(self):
        logs = [untuned_log(0), untuned_log(1, taken=(1, 0, 0, 0), reasons="untuned=155")]
        self.assertIn("not met: no call taken", verdicts.untuned(2, [0, 0], logs).detail)

    def test_the_nvlink_case_fails(self):
        logs = [untuned_log(r, setup(r, "", links="full nvlink")) for r in range(2)]
        detail = verdicts.untuned(2, [0, 0], logs).detail
        self.assertIn("2 ranks found the PCIe case, none eligible", detail.split("not met:")[1])
        self.assertIn("each says it is untuned", detail)

    def test_an_eligible_untuned_communicator_that_holds_its_block_fails(self):
        """The way it was before: eligible, holding its block, every call forwarded all the same."""
        note = ("; pcie untuned: every call goes to NCCL (untuned) until `nccl-car tune` has measured 2 ranks over "
                "PCIe on this machine")
        logs = [untuned_log(r, setup(r, note)) for r in range(2)]
        detail = verdicts.untuned(2, [0, 0], logs).detail
        self.assertIn("2 ranks found the PCIe case, none eligible", detail.split("not met:")[1])
        self.assertIn("none holds memory for it", detail)

    def test_a_wrong_sum_or_another_reason_fails(self):
        self.assertEqual(verdicts.untuned(2, [0, 1], [untuned_log(0), untuned_log(1)]).status, FAIL)
        logs = [untuned_log(0), untuned_log(1, reasons="untuned=132 too-large=24")]
        self.assertIn("no call forwarded for another reason", verdicts.untuned(2, [0, 0], logs).detail)


class TunedTableTest(unittest.TestCase):
    OUTPUT = ("tune: 2 ranks: PCIe (push kernels only)\ntable: /tmp/x/pcie.table (2 rows)\n"
              "the library follows the table at every size measured (2 groups)\n")

    def test_a_pcie_table_with_a_kernel_of_ours_passes(self):
        verdict = verdicts.tuned_table(0, self.OUTPUT, {"usable": True, "why": None, "rows": ROWS})
        self.assertEqual(verdict.status, PASS, verdict.detail)

    def test_failures(self):
        nvlink = [dict(row, links="nvlink") for row in ROWS]
        self.assertIn("every row of the PCIe case", verdicts.tuned_table(
            0, self.OUTPUT, {"usable": True, "why": None, "rows": nvlink}).detail)
        all_nccl = [dict(row, winner="nccl") for row in ROWS]
        self.assertIn("some size to a kernel of ours", verdicts.tuned_table(
            0, self.OUTPUT, {"usable": True, "why": None, "rows": all_nccl}).detail)
        self.assertIn("a table the library reads", verdicts.tuned_table(1, "", None).detail)
        self.assertIn("it found the PCIe case", verdicts.tuned_table(
            0, self.OUTPUT.replace("PCIe (push kernels only)", "NVLink"), {"usable": True, "why": None,
                                                                         "rows": ROWS}).detail)


class FollowingTest(unittest.TestCase):
    def test_calls_as_the_table_says_pass(self):
        verdict = verdicts.following(2, [0, 0], [tuned_log(0), tuned_log(1)], ROWS)
        self.assertEqual(verdict.status, PASS, verdict.detail)

    def test_a_call_the_table_gives_nccl_taken_fails(self):
        logs = [tuned_log(0, traces=((16, "1shot"), (8192, "1shot"))), tuned_log(1)]
        verdict = verdicts.following(2, [0, 0], logs, ROWS)
        self.assertIn("not met: each as the table says", verdict.detail)
        self.assertIn("8192 bytes of bf16 -> 1shot (the table: nccl)", verdict.notes[0])

    def test_another_kernel_or_an_untraced_call_fails(self):
        logs = [tuned_log(0, traces=((16, "2shot"), (4096, "1shot"))), tuned_log(1)]
        self.assertIn("each as the table says", verdicts.following(2, [0, 0], logs, ROWS).detail)
        untraced = tuned_log(1).replace(trace(1, 4096, "1shot") + "\n", "")
        self.assertIn("each traced", verdicts.following(2, [0, 0], [tuned_log(0), untraced], ROWS).detail)

    def test_untuned_ranks_or_wrong_sums_fail(self):
        logs = [tuned_log(0), untuned_log(1)]
        self.assertIn("eligible over PCIe, tuned", verdicts.following(2, [0, 0], logs, ROWS).detail)
        self.assertEqual(verdicts.following(2, [0, 1], [tuned_log(0), tuned_log(1, wrong=1)], ROWS).status, FAIL)


if __name__ == "__main__":
    unittest.main()
