"""The library's log lines, added up over communicators and processes."""

import unittest

import cli_support  # noqa: F401  (puts tools/ on sys.path)
from nccl_car_cli.logparse import LogTally

# Two processes (pids 100 and 200) on one host, each with rank 0 or 1 of one eligible
# 2-rank communicator; a third process with a 4-rank communicator spanning hosts; an
# mpirun --tag-output prefix; a WARN; lines that are not the library's.
SAMPLE = """\
NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node-a:100:101 [0] NCCL-CAR INFO real NCCL found as the next library (RTLD_NEXT)
node-a:100:101 [0] NCCL-CAR INFO comm 0x55d0c0a0 rank 0/2 setup: eligible (ipc peers, full nvlink, sm_90, up to 8388608 bytes)
[1,1]<stderr>:node-a:200:201 [1] NCCL-CAR INFO comm 0x7f00aa00 rank 1/2 setup: eligible (ipc peers, full nvlink, sm_90, up to 8388608 bytes)
node-b:300:301 [0] NCCL-CAR INFO comm 0x1234 rank 1/4 setup: not eligible: ranks span 2 hosts
node-b:300:301 [0] shim.cc:123 NCCL-CAR WARN NCCL_CAR_ALGO differs between rank 0 and rank 1
node-a:100:101 [0] NCCL-CAR TRACE comm 0x55d0c0a0 call 1: 1stage 4096 bytes
step 10 loss 2.31
node-a:100:101 [0] NCCL-CAR INFO comm 0x55d0c0a0 rank 0/2 released: taken 1shot=0 2shot=0 1stage=12 2stage=3 (1052688 bytes) forwarded 4 (op=1 too-large=3)
[1,1]<stderr>:node-a:200:201 [1] NCCL-CAR INFO comm 0x7f00aa00 rank 1/2 released: taken 1shot=0 2shot=0 1stage=12 2stage=3 (1052688 bytes) forwarded 5 (op=1 empty=1 too-large=3)
node-b:300:301 [0] NCCL-CAR INFO comm 0x1234 rank 1/4 released: taken 1shot=0 2shot=0 1stage=0 2stage=0 (0 bytes) forwarded 20 (ineligible-comm=20)
"""


def tally_of(text):
    tally = LogTally()
    for line in text.splitlines(keepends=True):
        tally.feed(line)
    return tally


class LogTallyTest(unittest.TestCase):
    def test_sums_over_communicators_and_processes(self):
        tally = tally_of(SAMPLE)
        self.assertEqual(tally.library_lines, 9)
        self.assertEqual(len(tally.processes), 3)
        self.assertEqual(tally.setups, 3)
        self.assertEqual(tally.communicators, 1)  # only one rank-0 setup line
        self.assertEqual(tally.eligible, 2)
        self.assertEqual(dict(tally.not_eligible), {"ranks span 2 hosts": 1})
        self.assertEqual(tally.taken_calls, 30)
        self.assertEqual(tally.taken["2stage"], 6)
        self.assertEqual(tally.taken_bytes, 2 * 1052688)
        self.assertEqual(tally.forwarded, 29)
        self.assertEqual(dict(tally.forward_reasons),
                         {"op": 2, "too-large": 6, "empty": 1, "ineligible-comm": 20})
        self.assertEqual(tally.warnings, ["shim.cc:123: NCCL_CAR_ALGO differs between rank 0 and rank 1"])
        self.assertEqual(tally.never_released, 0)
        self.assertEqual(tally.not_understood, [])

    def test_summary_text(self):
        summary = "\n".join(tally_of(SAMPLE).summary_lines())
        self.assertIn("3 process(es); 1 communicator(s), 3 communicator rank(s) set up: "
                      "2 eligible, 1 not eligible", summary)
        self.assertIn("not eligible (1 rank(s)): ranks span 2 hosts", summary)
        self.assertIn("taken: 30 call(s) (1shot 0, 2shot 0, 1stage 24, 2stage 6)", summary)
        self.assertIn("(2105376 bytes)", summary)
        self.assertIn("forwarded to NCCL: 29 call(s) (ineligible-comm 20, too-large 6, op 2, "
                      "empty 1)", summary)
        self.assertIn("WARN lines: 1", summary)

    def test_each_release_keeps_its_own_counts(self):
        tally = tally_of(SAMPLE)
        self.assertEqual([dict(taken) for taken in tally.released],
                         [{"1shot": 0, "2shot": 0, "1stage": 12, "2stage": 3}] * 2 +
                         [{"1shot": 0, "2shot": 0, "1stage": 0, "2stage": 0}])

    def test_trace_lines_count_the_calls_taken(self):
        tally = tally_of("h:1:2 [0] NCCL-CAR TRACE rank 0 all-reduce 4096 x bf16 (8192 bytes) -> 1shot\n"
                         "h:1:2 [0] NCCL-CAR TRACE rank 0 all-reduce 4194304 x fp32 (16777216 bytes) -> 2shot\n"
                         "[1,1]<stderr>:h:3:3 [1] NCCL-CAR TRACE rank 1 all-reduce 4096 x bf16 (8192 bytes) "
                         "-> 1shot\n"
                         "h:1:2 [0] NCCL-CAR INFO rank 0 all-reduce 16 x bf16 (32 bytes) -> 1shot\n"
                         # Since every op is taken, the line names it after the type.
                         "h:1:2 [0] NCCL-CAR TRACE rank 0 all-reduce 3 x int64 max (24 bytes) -> 1shot\n"
                         "h:1:2 [0] NCCL-CAR TRACE rank 0 all-reduce 9 x fp8e4m3 avg (9 bytes) -> 2shot\n")
        self.assertEqual(dict(tally.traced), {"1shot": 3, "2shot": 2})
        self.assertEqual(tally.taken_calls, 0)  # released: lines alone count as taken
        # The TRACE line in SAMPLE is in an older shape: not counted.
        self.assertEqual(sum(tally_of(SAMPLE).traced.values()), 0)

    def test_forwarded_zero_has_no_reasons(self):
        tally = tally_of("h:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/2 released: taken 1shot=0 2shot=0 1stage=5 "
                         "2stage=0 (80 bytes) forwarded 0\n")
        self.assertEqual((tally.releases, tally.taken_calls, tally.forwarded), (1, 5, 0))
        self.assertIn("forwarded to NCCL: 0 call(s)\n", "\n".join(tally.summary_lines()) + "\n")

    def test_setups_never_released_are_reported(self):
        tally = tally_of(SAMPLE.split("step 10")[0])
        self.assertEqual(tally.never_released, 3)
        self.assertIn("no communicator was released", "\n".join(tally.summary_lines()))
        partly = tally_of(SAMPLE + "h:9:9 [0] NCCL-CAR INFO comm 0x9 rank 0/2 setup: eligible (x)\n")
        self.assertEqual(partly.never_released, 1)
        self.assertIn("1 communicator rank(s) never released", "\n".join(partly.summary_lines()))

    def test_comm_address_reused_by_another_process_is_separate(self):
        line = "h:{pid}:1 [0] NCCL-CAR INFO comm 0xabc rank 0/2 {event}\n"
        tally = tally_of(line.format(pid=1, event="setup: eligible (x)") +
                         line.format(pid=2, event="setup: eligible (x)") +
                         line.format(pid=1, event="released: taken 1shot=0 2shot=0 1stage=1 2stage=0 (16 bytes) forwarded 0"))
        self.assertEqual(tally.never_released, 1)

    def test_no_library_line(self):
        tally = tally_of("hello\nNCCL INFO something\nh:1:2 [0] NCCL WARN not ours\n")
        self.assertEqual(tally.library_lines, 0)
        self.assertEqual(tally.summary_lines(), [
            "nccl-car: no NCCL-CAR line was seen: the library was not loaded, or the program "
            "made no NCCL calls"])

    def test_unknown_format_is_flagged_not_counted(self):
        tally = tally_of("h:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/2 released: took 5 calls\n")
        self.assertEqual((tally.releases, tally.taken_calls), (0, 0))
        self.assertEqual(len(tally.not_understood), 1)
        self.assertIn("not understood", "\n".join(tally.summary_lines()))


if __name__ == "__main__":
    unittest.main()
