"""The verdicts on nccl-tests, PyTorch, ctypes and JAX runs, on canned logs."""

import unittest

from runner_support import FAIL, PASS, info, library_kernels, log, released, setup
from e2e_runner import verdicts_frameworks as verdicts
from e2e_runner.verdict import kernels_text
from e2e_runner.launch import TIMED_OUT

ROW = ("{size:>12} {count:>13}  bfloat16  {redop:>6}      -1    11.07    0.74    0.74  {wrong_out:>6}"
       "    10.88    0.75    0.75  {wrong_in:>6}")


def perf_log(rows=((1024, 0, 0), (4096, 0, 0)), bounds="0 OK", ranks=2, eligible=2, exit_line=True,
             taken=(20, 4, 0, 0), reasons="", library=True, redop="sum", **movers):
    """all_reduce_perf -c 1 under mpirun --tag-output, with the library's lines of every rank
    (none when not `library`); each row (size, #wrong out of place, #wrong in place). The
    released: lines count `taken` by the all-reduce's kernels and `movers` (allgather=N,
    reducescatter=N) by the others'."""
    lines = ["# nccl-tests version 2.17.1 nccl-headers=22809 nccl-library=22809",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
             "busbw #wrong"]
    if library:
        lines += [f"[1,{rank}]<stderr>:" + setup(rank, ranks, eligible=rank < eligible) for rank in range(ranks)]
    lines += [ROW.format(size=size, count=size // 2, redop=redop, wrong_out=out, wrong_in=inside)
              for size, out, inside in rows]
    forwarded = sum(int(pair.split("=")[1]) for pair in reasons.split())
    if library:
        lines += [f"[1,{rank}]<stderr>:" + released(rank, ranks, taken=taken, forwarded=forwarded, reasons=reasons,
                                                     **movers)
                  for rank in range(ranks)]
    if bounds:
        lines.append(f"# Out of bounds values : {bounds}")
    if exit_line:
        lines.append("# Avg bus bandwidth    : 0.552951")
    return log(*lines)


class LibraryKernelsCase(unittest.TestCase):
    """The verdicts that count calls by kernel, given the library's kernels as the runner
    gives them (context.kernels): read from this build's query program."""

    def setUp(self):
        self.kernels = library_kernels(self)

    def taken_by(self, collective):
        """How the verdicts name `collective`'s kernels ("a/b" for two)."""
        return kernels_text(self.kernels, collective)

    def nccl_tests(self, *args, **options):
        return verdicts.nccl_tests(*args, kernels=self.kernels, **options)

    def nccl_tests_every_type(self, *args, **options):
        return verdicts.nccl_tests_every_type(*args, kernels=self.kernels, **options)

    def torch_every_op(self, *args, **options):
        return verdicts.torch_every_op(*args, kernels=self.kernels, **options)


class NcclTestsTest(LibraryKernelsCase):
    def test_a_clean_run_passes(self):
        verdict = self.nccl_tests(0, perf_log(), 2)
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertEqual(verdict.detail, "exit 0, 2 sizes, #wrong 0, 2 communicator ranks eligible, 48 calls taken, "
                                         "0 forwarded (none)")

    def test_a_wrong_element_in_either_column_fails(self):
        for rows in (((1024, 0, 0), (4096, 2, 0)), ((1024, 0, 1), (4096, 0, 0))):
            with self.subTest(rows=rows):
                verdict = self.nccl_tests(0, perf_log(rows=rows), 2)
                self.assertEqual(verdict.status, FAIL)
                self.assertIn("#wrong 0", verdict.detail.split("not met:")[1])

    def test_the_bounds_line_must_say_0_ok(self):
        self.assertIn("Out of bounds values", self.nccl_tests(0, perf_log(bounds="2 FAILED"), 2).detail)
        self.assertEqual(self.nccl_tests(0, perf_log(bounds=None), 2).status, FAIL)

    def test_no_table_fails_even_with_exit_0(self):
        verdict = self.nccl_tests(0, log("gpu-node: Test NCCL failure common.cu:1005 'unhandled cuda error'"), 2)
        self.assertIn("a table of results", verdict.detail)

    def test_exit_code_and_eligible_ranks_count(self):
        self.assertEqual(self.nccl_tests(1, perf_log(), 2).status, FAIL)
        self.assertEqual(self.nccl_tests(TIMED_OUT, perf_log(), 2).status, FAIL)
        few = self.nccl_tests(0, perf_log(ranks=4, eligible=3), 4)
        self.assertIn("not met: 4 ranks eligible", few.detail)

    def test_a_run_without_the_library_fails(self):
        # What multi-gpu-nccl-tests-* passed before: no library line at all and the rows
        # unchecked (N/A counted as 0 wrong), the verdict called without a minimum eligible.
        unchecked = perf_log(rows=((1024, "N/A", "N/A"), (4096, "N/A", "N/A")), library=False)
        verdict = self.nccl_tests(0, unchecked, 2)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("not met: every row checked (no N/A), 2 ranks eligible, 2 ranks released, calls taken",
                      verdict.detail)
        self.assertIn("2 ranks eligible", self.nccl_tests(0, perf_log(library=False), 2).detail)

    def test_a_run_with_every_call_forwarded_fails(self):
        # Every rank eligible, every row checked and right: what the rig's verdict asked.
        forwarded = perf_log(taken=(0, 0, 0, 0), reasons="failed=24")
        verdict = self.nccl_tests(0, forwarded, 2)
        self.assertIn("not met: calls taken, no call forwarded but too-large", verdict.detail)
        self.assertIn("forwarded for other reasons: failed=48", verdict.notes)

    def test_only_forwards_the_table_explains_pass(self):
        self.assertEqual(self.nccl_tests(0, perf_log(reasons="too-large=3"), 2).status, PASS)
        self.assertEqual(self.nccl_tests(0, perf_log(reasons="op=3"), 2).status, FAIL)
        mulsum = perf_log(rows=((1024, 0, 0), (4096, 0, 0)), redop="mulsum", reasons="op=3")
        self.assertEqual(self.nccl_tests(0, mulsum, 2).status, PASS)
        self.assertEqual(self.nccl_tests(0, perf_log(reasons="empty=1"), 2).status, FAIL)
        empty = perf_log(rows=((1, 0, 0), (4096, 0, 0)), reasons="empty=1")
        self.assertEqual(self.nccl_tests(0, empty, 2).status, PASS)
        self.assertEqual(self.nccl_tests(0, perf_log(reasons="comm-not-ready=1"), 2).status, FAIL)


class NcclTestsOtherCollectivesTest(LibraryKernelsCase):
    """all_gather_perf and reduce_scatter_perf: their own kernel must have taken calls."""

    def test_calls_taken_by_the_collective_s_kernel_pass(self):
        gathered = perf_log(redop="none", taken=(0, 0, 0, 0), allgather=24)
        verdict = self.nccl_tests(0, gathered, 2, "all-gather")
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertEqual(verdict.detail, "exit 0, 2 sizes, #wrong 0, 2 communicator ranks eligible, 48 calls taken, "
                                         "0 forwarded (none)")
        scattered = perf_log(taken=(0, 0, 0, 0), reducescatter=24, reasons="too-large=2")
        self.assertEqual(self.nccl_tests(0, scattered, 2, "reduce-scatter").status, PASS)

    def test_no_call_taken_fails(self):
        verdict = self.nccl_tests(0, perf_log(redop="none", taken=(0, 0, 0, 0), reasons="too-large=24"), 2,
                                      "all-gather")
        self.assertEqual(verdict.status, FAIL)
        self.assertIn(f"not met: calls taken, all-gather calls taken by {self.taken_by('all-gather')}", verdict.detail)
        self.assertIn("0 calls taken", verdict.detail)

    def test_calls_counted_by_another_collective_s_kernels_fail(self):
        # all_reduce_perf's counts in an all_gather_perf run: the library counted the calls
        # it took as all-reduces, or the run was not the one the verdict was asked about.
        verdict = self.nccl_tests(0, perf_log(redop="none"), 2, "all-gather")
        self.assertEqual(verdict.status, FAIL)
        self.assertIn(f"not met: all-gather calls taken by {self.taken_by('all-gather')}, no call taken by a kernel "
                      "of another collective", verdict.detail)
        self.assertIn("taken by kernels of other collectives: 1shot=40 2shot=8", verdict.notes)
        both = perf_log(taken=(0, 0, 0, 0), reducescatter=24, allgather=1)
        self.assertIn("no call taken by a kernel of another collective",
                      self.nccl_tests(0, both, 2, "reduce-scatter").detail)
        # The all-reduce's verdict asks the same of its own runs.
        self.assertIn("no call taken by a kernel of another collective",
                      self.nccl_tests(0, perf_log(allgather=1), 2).detail)

    def test_a_kernel_the_library_gains_counts_for_its_collective(self):
        # The library's lines name kernels it has under names these canned lines do not know:
        # counted for the collective the library says they serve; a name it does not give, for
        # none.
        renamed = perf_log()
        for kernel in self.kernels["all-reduce"]:
            renamed = renamed.replace(f" {kernel}=", f" new{kernel}=")
        gained = dict(self.kernels, **{"all-reduce": tuple(f"new{kernel}" for kernel in self.kernels["all-reduce"])})
        verdict = verdicts.nccl_tests(0, renamed, 2, kernels=gained)
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("48 calls taken", verdict.detail)
        verdict = self.nccl_tests(0, renamed, 2)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("no call taken by a kernel of another collective", verdict.detail)

    def test_a_wrong_element_fails_whatever_was_taken(self):
        wrong = perf_log(rows=((1024, 0, 0), (4096, 0, 3)), redop="none", taken=(0, 0, 0, 0), allgather=24)
        verdict = self.nccl_tests(0, wrong, 2, "all-gather")
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("not met: #wrong 0", verdict.detail)
        self.assertIn("#wrong 3", verdict.detail)


WORDS = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
         "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
ODD_SIZES = [4 + 999997 * step for step in range(10)]


def every_type_log(op="prod", sizes=ODD_SIZES, types=tuple(WORDS), wrong=None, ranks=2, eligible=2, released_ranks=2,
                   reasons="too-large=60 empty=12", ops=None, kernels=None):
    """all_reduce_perf -c 1 -d all -o OP under mpirun, as nccl-tests 2.17 prints it, with the
    library's lines of every rank (tagged as mpirun --tag-output would, but rank 0's), `wrong`
    {(type, size): text} in the out-of-place #wrong column; the released: lines count
    `kernels` (released()'s arguments; by default 360 calls of the all-reduce's kernels)."""
    wrong = wrong or {}
    lines = ["# nccl-tests version 2.17.1 nccl-headers=22809 nccl-library=22809",
             "# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 4 maxBytes 9437184 step: 999997(bytes) warmup iters: 0 iters: 1 "
             "agg iters: 1 validation: 1 graph: 0"]
    def tag(rank):  # ranks past 0 as mpirun --tag-output marks their lines
        return f"[1,{rank}]<stderr>:" if rank else ""

    lines += [tag(rank) + setup(rank, ranks, eligible=rank < eligible) for rank in range(ranks)]
    lines += ["#                                                              out-of-place"
              "                       in-place",
              "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time"
              "   algbw   busbw  #wrong"]
    for dtype in types:
        for redop in ops or [op]:
            for size in sizes:
                count = size // WORDS[dtype]
                lines.append(f"{count * WORDS[dtype]:12}  {count:12}  {dtype:>8}  {redop:>6}      -1    21.35    0.00"
                             f"    0.00  {wrong.get((dtype, size), '0'):>5}    20.98    0.00    0.00      0")
    forwarded = sum(int(pair.split("=")[1]) for pair in reasons.split())
    lines += [tag(rank) + released(rank, ranks, forwarded=forwarded, reasons=reasons,
                                   **(kernels or dict(taken=(300, 40, 0, 20))))
              for rank in range(released_ranks)]
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.10297", "#",
              "# Collective test concluded: all_reduce_perf"]
    return log(*lines)


class NcclTestsEveryTypeTest(LibraryKernelsCase):
    def verdict(self, text, op="prod", sizes=10, ranks=2, returncode=0):
        return self.nccl_tests_every_type(returncode, text, op, sizes, ranks)

    def test_a_clean_run_passes_and_says_what_it_saw(self):
        verdict = self.verdict(every_type_log())
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertEqual(verdict.detail, "exit 0, 120 rows (12 types: also f8e4m3 f8e5m2; prod), #wrong 0, 2 ranks "
                                         "eligible, 720 calls taken, 144 forwarded (too-large=120 empty=24)")
        # Without fp8 (older nccl-tests or NCCL) the ten other types are enough.
        older = every_type_log(types=[dtype for dtype in WORDS if not dtype.startswith("f8")])
        self.assertEqual(self.verdict(older).status, PASS)

    def test_a_forward_for_any_other_reason_fails_and_is_named(self):
        for reason in ("op", "type", "symmetric-window", "ineligible-comm", "failed", "comm-not-ready"):
            with self.subTest(reason=reason):
                verdict = self.verdict(every_type_log(reasons=f"too-large=60 {reason}=3"))
                self.assertEqual(verdict.status, FAIL)
                self.assertIn("not met: no call forwarded but too-large or empty", verdict.detail)
                self.assertIn(f"forwarded for other reasons: {reason}=6", verdict.notes)

    def test_forwards_without_a_reason_count_as_unexpected(self):
        text = every_type_log(reasons="too-large=60").replace("forwarded 60 (too-large=60)",
                                                              "forwarded 61 (too-large=60)")
        verdict = self.verdict(text)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("forwarded for other reasons: no reason given=2", verdict.notes)

    def test_empty_only_where_a_size_holds_no_whole_element(self):
        small = [24 + 48 * step for step in range(100)]
        self.assertEqual(self.verdict(every_type_log(sizes=small, reasons="too-large=0"), sizes=100).status, PASS)
        verdict = self.verdict(every_type_log(sizes=small, reasons="empty=1"), sizes=100)
        self.assertIn("not met: no call forwarded but too-large", verdict.detail)

    def test_a_wrong_element_fails_and_the_row_is_shown(self):
        verdict = self.verdict(every_type_log(wrong={("bfloat16", 3999992): "17"}))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("#wrong 17", verdict.detail)
        self.assertIn("3999992 B bfloat16 prod: #wrong 17 out of place, 0 in place", verdict.notes)
        # nccl-tests prints #wrong with %g: 9e+06 is 9 million wrong elements, not an unreadable row.
        verdict = self.verdict(every_type_log(wrong={("int8", 8999977): "9e+06"}))
        self.assertIn("#wrong 9000000", verdict.detail)
        self.assertNotIn("sizes of each", verdict.detail)

    def test_an_unchecked_row_fails(self):
        verdict = self.verdict(every_type_log(wrong={("double", 4): "N/A"}))
        self.assertIn("not met: every row checked (no N/A)", verdict.detail)

    def test_a_short_table_fails(self):
        # all_reduce_perf died after the first types (a crash, or a time limit).
        verdict = self.verdict(every_type_log(types=("int8", "uint8", "int32")), returncode=124)
        self.assertIn("10 sizes of each of int8, uint8", verdict.detail)
        self.assertEqual("rows per type: int8=10 uint8=10 int32=10 uint32=0 int64=0 uint64=0 half=0 float=0 double=0 "
                         "bfloat16=0", verdict.notes[0])
        one_size_short = self.verdict(every_type_log(sizes=ODD_SIZES[:9]))
        self.assertIn("not met: 10 sizes of each", one_size_short.detail)

    def test_rows_of_another_op_fail(self):
        # -o all: mulsum rows too (and the library forwards mulsum as op).
        verdict = self.verdict(every_type_log(ops=["prod", "mulsum"]))
        self.assertIn("only prod rows", verdict.detail)
        self.assertIn("rows of other ops: mulsum", verdict.notes)

    def test_every_rank_eligible_released_and_taking_calls(self):
        self.assertIn("not met: 2 ranks eligible", self.verdict(every_type_log(eligible=1)).detail)
        self.assertIn("not met: 2 ranks released", self.verdict(every_type_log(released_ranks=1)).detail)
        untaken = every_type_log().replace("taken 1shot=300 2shot=40 allgather=0 reducescatter=0 1stage=0 2stage=20",
                                           "taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0")
        self.assertIn("not met: calls taken", self.verdict(untaken).detail)
        self.assertIn("not met: exit 0", self.verdict(every_type_log(), returncode=1).detail)


class NcclTestsEveryTypeOtherCollectivesTest(LibraryKernelsCase):
    def test_all_gather_perf_s_rows_have_no_op(self):
        gathered = every_type_log(op="none", kernels=dict(allgather=360))
        verdict = self.nccl_tests_every_type(0, gathered, "none", 10, 2, "all-gather")
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("120 rows (12 types: also f8e4m3 f8e5m2; none), #wrong 0, 2 ranks eligible, 720 calls taken",
                      verdict.detail)
        self.assertIn("not met: only sum rows", self.nccl_tests_every_type(0, gathered, "sum", 10, 2,
                                                                                 "all-gather").detail)

    def test_reduce_scatter_perf_needs_its_own_kernel(self):
        scattered = every_type_log(op="avg", kernels=dict(reducescatter=360))
        self.assertEqual(self.nccl_tests_every_type(0, scattered, "avg", 10, 2, "reduce-scatter").status, PASS)
        untaken = every_type_log(op="avg", kernels=dict(reducescatter=0), reasons="too-large=360")
        verdict = self.nccl_tests_every_type(0, untaken, "avg", 10, 2, "reduce-scatter")
        self.assertEqual(verdict.status, FAIL)
        self.assertIn(f"not met: calls taken, reduce-scatter calls taken by {self.taken_by('reduce-scatter')}",
                      verdict.detail)
        wrong = every_type_log(op="avg", kernels=dict(reducescatter=360), wrong={("half", 1000001): "5"})
        verdict = self.nccl_tests_every_type(0, wrong, "avg", 10, 2, "reduce-scatter")
        self.assertIn("not met: #wrong 0", verdict.detail)
        self.assertIn("1000000 B half avg: #wrong 5 out of place, 0 in place", verdict.notes)


# torch_ops_e2e.py's matrices: noun, calls, shape.
TORCH_MATRICES = (("all-reduces", 400, "8 types x 5 ops x 5 lengths x 2 placements"),
                  ("reduce-scatters", 480, "8 types x 5 ops x 4 lengths x 3 placements"),
                  ("all-gathers", 96, "8 types x 4 lengths x 3 placements"),
                  ("list all-gathers", 64, "8 types x 4 lengths x 2 placements"))


def torch_ops_log(ranks, passing=None, taken=400, reasons="", interleaved=False, made=None, scattered=480,
                  gathered=160, matrices=TORCH_MATRICES):
    """torch_ops_e2e.py under torchrun, with the library's lines of every rank: each rank's
    released: line counts `taken` calls by the all-reduce's kernels, `scattered` by
    reducescatter, `gathered` by allgather; its PASS line for each of `matrices` counts the
    calls made[noun] says (the whole matrix by default); ranks from `passing` on fail their
    reduce-scatters."""
    passing = ranks if passing is None else passing
    made = made or {}
    forwarded = sum(int(pair.split("=")[1]) for pair in reasons.split())
    lines, results = [], []
    for rank in range(ranks):
        lines += [setup(rank, ranks), released(rank, ranks, taken=(taken - 100, 60, 40, 0) if taken else (0, 0, 0, 0),
                                               reducescatter=scattered, allgather=gathered, forwarded=forwarded,
                                               reasons=reasons)]
        for noun, calls, shape in matrices:
            if rank >= passing and noun == "reduce-scatters":
                lines.append(f"rank {rank}/{ranks}: WRONG reduce-scatter int32 avg n=1001 at +1: 334 of 1001 elements "
                             "(first at 2: got -1, want 0)")
                results.append(f"rank {rank}/{ranks}: FAIL 1 of 480 reduce-scatters wrong, 480 to make ({shape}): "
                               "['reduce-scatter int32 avg n=1001 at +1']")
            else:
                results.append(f"rank {rank}/{ranks}: PASS {made.get(noun, calls)} {noun} ({shape}), 0 wrong")
    # Two ranks' lines run into one when each writes its line and newline apart.
    return log(*lines, *(["".join(results)] if interleaved else results))


class TorchEveryOpTest(LibraryKernelsCase):
    def test_every_rank_passing_with_every_call_taken_passes(self):
        verdict = self.torch_every_op(3, 0, torch_ops_log(3))
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertEqual(verdict.detail, "exit 0, 3/3 ranks passed, 3 eligible; all-reduce: 1200 made, 1200 taken; "
                                         "reduce-scatter: 1440 made, 1440 taken; all-gather: 480 made, 480 taken; "
                                         "0 forwarded (none)")
        self.assertEqual(self.torch_every_op(3, 0, torch_ops_log(3, interleaved=True)).status, PASS)
        self.assertEqual(self.torch_every_op(2, 0, torch_ops_log(2, reasons="too-large=1")).status, PASS)

    def test_a_wrong_rank_fails_and_is_shown(self):
        verdict = self.torch_every_op(2, 1, torch_ops_log(2, passing=1))
        self.assertIn("not met: exit 0, all 2 ranks pass their reduce-scatters", verdict.detail)
        self.assertIn("1/2 ranks passed", verdict.detail)
        self.assertIn("rank 1/2: WRONG reduce-scatter int32 avg n=1001 at +1: 334 of 1001 elements (first at 2: "
                      "got -1, want 0)", verdict.notes)

    def test_a_script_without_the_other_collectives_fails(self):
        # The script as it was: all-reduces only, every one right and taken.
        verdict = self.torch_every_op(2, 0, torch_ops_log(2, matrices=TORCH_MATRICES[:1], scattered=0, gathered=0))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("not met: all 2 ranks pass their reduce-scatters, all 2 ranks pass their all-gathers, "
                      "all 2 ranks pass their list all-gathers", verdict.detail)
        self.assertIn("0/2 ranks passed", verdict.detail)

    def test_forwarded_or_untaken_calls_fail(self):
        verdict = self.torch_every_op(2, 0, torch_ops_log(2, reasons="op=80"))
        self.assertIn("not met: no call forwarded but too-large", verdict.detail)
        self.assertIn("forwarded for other reasons: op=160", verdict.notes)
        verdict = self.torch_every_op(2, 0, torch_ops_log(2, taken=399))
        self.assertIn("not met: the 800 all-reduces made taken or too-large", verdict.detail)
        untaken = self.torch_every_op(2, 0, torch_ops_log(2, taken=0, reasons="too-large=400"))
        self.assertIn("not met: the 800 all-reduces made taken or too-large", untaken.detail)

    def test_gathers_and_scatters_not_taken_by_their_kernels_fail(self):
        # Every check right, and NCCL did the gathering: PyTorch cannot tell, the counts can.
        verdict = self.torch_every_op(2, 0, torch_ops_log(2, gathered=0, reasons="too-large=160"))
        self.assertEqual(verdict.status, FAIL)
        self.assertIn(f"not met: the 320 all-gathers made taken by {self.taken_by('all-gather')}", verdict.detail)
        self.assertIn("all-gather: 320 made, 0 taken", verdict.detail)
        # too-large may excuse an all-reduce, never one of these (all within the limits).
        verdict = self.torch_every_op(2, 0, torch_ops_log(2, scattered=479, reasons="too-large=1"))
        self.assertIn(f"not met: the 960 reduce-scatters made taken by {self.taken_by('reduce-scatter')}",
                      verdict.detail)

    def test_the_largest_calls_may_go_to_nccl_as_too_large(self):
        # Integers and fp64 travel split, twice their bytes in the push areas: their largest tensors may not fit.
        verdict = self.torch_every_op(2, 0, torch_ops_log(2, taken=396, reasons="too-large=4"))
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("all-reduce: 800 made, 792 taken;", verdict.detail)
        self.assertIn("8 forwarded (too-large=8)", verdict.detail)

    def test_lines_of_another_world_size_do_not_count(self):
        self.assertEqual(self.torch_every_op(4, 0, torch_ops_log(2) + torch_ops_log(2)).status, FAIL)

    def test_a_case_pytorch_refused_fails(self):
        # The old script counted a refused combination as skipped and passed with fewer.
        skipped = torch_ops_log(2, taken=380).replace("PASS 400 all-reduces (8 types x 5 ops x 5 lengths x 2 "
                                                      "placements)", "PASS 380 all-reduces (8 types x 5 ops x 5 "
                                                      "lengths x 2 placements, 20 skipped)")
        self.assertIn("not met: all 2 ranks pass their all-reduces", self.torch_every_op(2, 0, skipped).detail)
        fewer = self.torch_every_op(2, 0, torch_ops_log(2, made={"reduce-scatters": 470}, scattered=470))
        self.assertIn("not met: each made its whole matrices", fewer.detail)


def torch_log(ranks, passing=None, taken=(10, 2, 0, 0), forwarded=0, reasons="", extra=()):
    """torch_e2e.py under torchrun: each rank's communicator, phases and verdict; `extra`
    lines (a second communicator's) after them."""
    passing = ranks if passing is None else passing
    lines = []
    for rank in range(ranks):
        lines += [setup(rank, ranks), f"rank {rank}/{ranks} phase eager: PASS",
                  f"rank {rank}/{ranks} phase graph: {'PASS' if rank < passing else 'FAIL'}",
                  released(rank, ranks, taken=taken, forwarded=forwarded, reasons=reasons),
                  f"rank {rank}/{ranks}: {'PASS' if rank < passing else 'FAIL [graph]'}"]
    return log(*lines, *extra)


class TorchTest(unittest.TestCase):
    def test_every_rank_passing_with_calls_taken_passes(self):
        verdict = verdicts.torch_ranks(4, 0, torch_log(4, forwarded=8, reasons="too-large=8"))
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("4/4 ranks passed, 4 communicator ranks eligible, 48 calls taken, 32 forwarded (too-large=32)",
                      verdict.detail)

    def test_a_failing_phase_fails_and_is_shown(self):
        verdict = verdicts.torch_ranks(4, 1, torch_log(4, passing=3))
        self.assertEqual(verdict.status, FAIL)
        self.assertEqual(verdict.notes, ["rank 3/4 phase graph: FAIL"])

    def test_lines_of_another_world_size_do_not_count(self):
        self.assertEqual(verdicts.torch_ranks(4, 0, torch_log(2) + torch_log(2)).status, FAIL)

    def test_a_run_with_every_call_forwarded_fails(self):
        # multi-gpu-torch asked for no call taken: this passed it.
        untouched = torch_log(2, taken=(0, 0, 0, 0), forwarded=30, reasons="ineligible-comm=30")
        verdict = verdicts.torch_ranks(2, 0, untouched)
        self.assertIn("not met: calls taken, no call forwarded but too-large or comm-not-ready", verdict.detail)

    def test_a_refused_communicator_fails_but_a_one_rank_group(self):
        one_rank = [setup(0, 1, comm=0x77, eligible=False, why="1 ranks (we take 2 to 8)"),
                    released(0, 1, comm=0x77, forwarded=81, reasons="ineligible-comm=81")]
        self.assertEqual(verdicts.torch_ranks(2, 0, torch_log(2, extra=one_rank)).status, PASS)
        refused = [setup(0, 2, comm=0x77, eligible=False, why="NVLink between the GPUs cannot be confirmed"),
                   released(0, 2, comm=0x77, forwarded=81, reasons="ineligible-comm=81")]
        verdict = verdicts.torch_ranks(2, 0, torch_log(2, extra=refused))
        self.assertIn("not met: no communicator of 2 or more ranks refused", verdict.detail)
        self.assertIn("forwarded for other reasons: ineligible-comm=81", verdict.notes)

    def test_a_way_that_cannot_reach_pip_s_pytorch_must_run_right_and_say_so(self):
        # A drop-in folder comes after the NCCL libtorch_cuda.so's RPATH finds (the one-H100
        # rig, 2026-12-07): right on NCCL alone, and nccl-car run's summary says so.
        summary = ("nccl-car: no communicator reached the library: its libnccl.so.2 was first on LD_LIBRARY_PATH, "
                   "but no NCCL call reached it\n  try: --mode audit")
        on_nccl = "\n".join(f"rank {rank}/2: PASS" for rank in range(2))
        self.assertEqual(verdicts.torch_unreached("dropin", 2, 0, on_nccl).status, PASS)
        self.assertEqual(verdicts.torch_unreached("tool-dropin", 2, 0, on_nccl + "\n" + summary).status, PASS)
        silent = verdicts.torch_unreached("tool-dropin", 2, 0, on_nccl)
        self.assertIn("not met: nccl-car run's summary says the library was not reached", silent.detail)
        self.assertIn("not met: no communicator set up", verdicts.torch_unreached("dropin", 2, 0, torch_log(2)).detail)
        self.assertIn("not met: all 2 ranks pass", verdicts.torch_unreached("dropin", 2, 0, "rank 0/2: PASS").detail)
        self.assertEqual(verdicts.torch_unreached("dropin", 2, 1, on_nccl).status, FAIL)

    def test_calls_before_the_ranks_agree_go_to_nccl_as_not_ready(self):
        # A nonblocking communicator's first calls go to NCCL while its set-up runs in the
        # background: as many as come before the ranks agree.
        for forwarded in (1, 40):
            with self.subTest(forwarded=forwarded):
                early = torch_log(2, forwarded=forwarded, reasons=f"comm-not-ready={forwarded}")
                self.assertEqual(verdicts.torch_ranks(2, 0, early).status, PASS)
        other = verdicts.torch_ranks(2, 0, torch_log(2, forwarded=2, reasons="comm-not-ready=1 op=1"))
        self.assertIn("not met: no call forwarded but too-large or comm-not-ready", other.detail)


class TorchWatchdogAbortTest(unittest.TestCase):
    GOOD = log("rank 0: first all_reduce done", "rank 1: first all_reduce done",
               "[rank0]:[E ProcessGroupNCCL.cpp:632] Watchdog caught collective operation timeout: WorkNCCL(...)",
               info("comm 0x55d0 rank 0/2 ncclCommAbort: our kernels told to stop"),
               released(0, 2, taken=(0, 0, 2, 0)),
               "torch.distributed.elastic.multiprocessing.errors.ChildFailedError")

    def test_a_timely_failure_through_our_hook_passes(self):
        verdict = verdicts.torch_watchdog_abort(1, 19.4, self.GOOD, TIMED_OUT)
        self.assertEqual(verdict.status, PASS, verdict.detail)
        self.assertIn("ended after 19 s with exit 1", verdict.detail)
        self.assertIn("rank 0: abort hook reached, 1 released, 2 calls taken, 0 forwarded", verdict.detail)

    def test_each_condition_fails_alone(self):
        self.assertIn("the job fails", verdicts.torch_watchdog_abort(0, 19, self.GOOD, TIMED_OUT).detail)
        self.assertIn("not by our time limit",
                      verdicts.torch_watchdog_abort(TIMED_OUT, 60, self.GOOD, TIMED_OUT).detail)
        self.assertIn("ends within 50 s", verdicts.torch_watchdog_abort(1, 55, self.GOOD, TIMED_OUT).detail)
        no_error = self.GOOD.replace("Watchdog caught collective operation timeout", "something")
        self.assertIn("a timeout error reported", verdicts.torch_watchdog_abort(1, 19, no_error, TIMED_OUT).detail)
        not_ours = self.GOOD.replace("our kernels told to stop", "nothing of ours")
        self.assertIn("our abort hook reached rank 0",
                      verdicts.torch_watchdog_abort(1, 19, not_ours, TIMED_OUT).detail)

    def test_a_blocked_call_that_was_not_ours_fails(self):
        # "our kernels told to stop" comes whenever the communicator has an engine: all the
        # old verdict asked. Here the blocked all-reduce went to NCCL (rank 1's lines, which
        # took theirs, do not count for rank 0).
        forwarded = self.GOOD.replace(released(0, 2, taken=(0, 0, 2, 0)),
                                      released(0, 2, taken=(0, 0, 1, 0), forwarded=1, reasons="too-large=1") + "\n" +
                                      released(1, 2, taken=(0, 0, 1, 0)))
        self.assertIn("ncclCommAbort: our kernels told to stop", forwarded)
        verdict = verdicts.torch_watchdog_abort(1, 19, forwarded, TIMED_OUT)
        self.assertIn("not met: rank 0 released with its 2 all-reduces taken, none forwarded", verdict.detail)
        unreleased = self.GOOD.replace(released(0, 2, taken=(0, 0, 2, 0)), "")
        self.assertEqual(verdicts.torch_watchdog_abort(1, 19, unreleased, TIMED_OUT).status, FAIL)

    def test_timed_out_matches_in_any_case(self):
        text = self.GOOD.replace("Watchdog caught collective operation timeout", "Operation Timed Out")
        self.assertEqual(verdicts.torch_watchdog_abort(1, 19, text, TIMED_OUT).status, PASS)


def ctypes_logs(ranks, eligible=True, taken=(45, 0, 0, 0), right=True, extra="", forwarded=0, reasons=""):
    return [log(extra, setup(rank, ranks, eligible=eligible) if eligible is not None else "",
                f"rank {rank}/{ranks}: {'PASS' if right else 'FAIL'} (19 checks, 0 wrong, NCCL from libnccl.so.2)",
                released(rank, ranks, taken=taken, forwarded=forwarded, reasons=reasons) if eligible is not None else "")
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

    def test_a_call_forwarded_for_another_reason_than_its_size_fails(self):
        verdict = verdicts.ctypes_client("audit-name", 2, [0, 0], ctypes_logs(2, forwarded=1, reasons="failed=1"))
        self.assertIn("not met: no call forwarded but too-large", verdict.detail)
        self.assertEqual(verdicts.ctypes_client("audit-name", 2, [0, 0],
                                                ctypes_logs(2, forwarded=6, reasons="too-large=6")).status, PASS)

    def test_the_tool_must_have_chosen_audit(self):
        chosen = ctypes_logs(2, extra="nccl-car run: mode audit: the script uses ctypes and names NCCL\n"
                                      "  taken: 45 call(s) (1shot 45), 180 KiB (184320 bytes), counted on every rank")
        self.assertEqual(verdicts.ctypes_client("tool-auto", 2, [0, 0], chosen).status, PASS)
        self.assertIn("nccl-car run chose mode audit", verdicts.ctypes_client("tool-auto", 2, [0, 0],
                                                                              ctypes_logs(2)).detail)

    def test_the_tool_s_summary_must_show_the_calls_taken(self):
        summary = "  taken: 45 call(s) (1shot 45), 180 KiB (184320 bytes), counted on every rank"
        for mode in ("tool-audit", "tool-dropin"):
            with self.subTest(mode=mode):
                self.assertEqual(verdicts.ctypes_client(mode, 2, [0, 0], ctypes_logs(2, extra=summary)).status, PASS)
                verdict = verdicts.ctypes_client(mode, 2, [0, 0], ctypes_logs(2, extra=summary.replace("45", "0")))
                self.assertIn("not met: nccl-car run's summary shows calls taken", verdict.detail)

    def test_preload_must_not_reach_the_client(self):
        unreached = ctypes_logs(2, eligible=None)
        self.assertEqual(verdicts.ctypes_client("preload", 2, [0, 0], unreached).status, PASS)
        reached = verdicts.ctypes_client("preload", 2, [0, 0], ctypes_logs(2))
        self.assertIn("not met: no communicator set up", reached.detail)

    def test_a_way_that_cannot_reach_the_client_must_say_so(self):
        # PyTorch imported first holds the NCCL its RPATH found: a drop-in folder cannot come
        # before it (the one-H200 rig, 2026-12-07), and nccl-car run's summary must say so.
        summary = ("nccl-car: no communicator reached the library: its libnccl.so.2 was first on LD_LIBRARY_PATH, "
                   "but no NCCL call reached it\n  try: --mode audit")
        unreached = ctypes_logs(2, eligible=None)
        self.assertEqual(verdicts.ctypes_client("dropin-name", 2, [0, 0], unreached, reached=False).status, PASS)
        self.assertEqual(verdicts.ctypes_client("tool-dropin", 2, [0, 0], ctypes_logs(2, eligible=None, extra=summary),
                                                reached=False).status, PASS)
        silent = verdicts.ctypes_client("tool-dropin", 2, [0, 0], unreached, reached=False)
        self.assertIn("not met: nccl-car run's summary says the library was not reached, the summary names "
                      "--mode audit", silent.detail)
        wrong = verdicts.ctypes_client("dropin-name", 2, [0, 0], ctypes_logs(2, eligible=None, right=False),
                                       reached=False)
        self.assertEqual(wrong.status, FAIL)
        self.assertIn("not met: no communicator set up",
                      verdicts.ctypes_client("dropin-name", 2, [0, 0], ctypes_logs(2), reached=False).detail)


def at_exit(rank, ranks, comm, calls):
    """A communicator's counts said at exit (JAX never destroys its own)."""
    return released(rank, ranks, comm=comm, taken=(calls, 0, 0, 0)).replace("released:", "alive at exit:")


class JaxTest(unittest.TestCase):
    AUTO = log("nccl-car run: mode audit: the script imports jax (--mode chooses another)",
               setup(0, 2), setup(1, 2, comm=0x66),
               "jax psum 2 devices: PASS (105 checks, 0 wrong; jax 0.11.2)",
               at_exit(0, 2, 0x55d0, 70), at_exit(1, 2, 0x66, 70),
               "nccl-car: 1 process(es); 1 communicator(s), 2 communicator rank(s) set up: 2 eligible, 0 not eligible",
               "  taken: 140 call(s) (1shot 140), 560 KiB (573440 bytes), counted on every rank",
               "  2 communicator rank(s) alive at exit (never destroyed): counted above from their counts at exit")
    PRELOAD = log("jax psum 2 devices: PASS (105 checks, 0 wrong; jax 0.11.2)",
                  "nccl-car: no communicator reached the library: it was preloaded, but no NCCL call reached it",
                  "  try: --mode audit")

    def test_auto_must_choose_audit_and_take_calls(self):
        verdict = verdicts.jax_through_tool(0, self.AUTO)
        self.assertEqual(verdict.status, PASS)
        self.assertIn("2 eligible, 2 alive at exit, 140 calls taken; jax psum 2 devices: PASS", verdict.detail)
        preloaded = self.AUTO.replace("mode audit", "mode preload")
        self.assertIn("mode audit chosen", verdicts.jax_through_tool(0, preloaded).detail)
        wrong = self.AUTO.replace("devices: PASS", "devices: FAIL")
        self.assertIn("every device's sums right", verdicts.jax_through_tool(1, wrong).detail)

    def test_the_summary_must_count_the_calls_said_at_exit(self):
        """Issue 47: JAX's calls were ours, but the summary said "taken: 0 call(s)"."""
        silent = "\n".join(line for line in self.AUTO.splitlines() if "alive at exit" not in line)
        verdict = verdicts.jax_through_tool(0, silent.replace("taken: 140", "taken: 0"))
        self.assertIn("not met: every communicator rank counted at exit, calls taken, counted at exit, the summary "
                      "shows them taken", verdict.detail)

    def test_auto_without_our_kernels_fails(self):
        untouched = "\n".join(line for line in self.AUTO.splitlines() if "NCCL-CAR" not in line)
        verdict = verdicts.jax_through_tool(0, untouched)
        self.assertIn("communicators eligible, every communicator rank counted at exit, calls taken", verdict.detail)

    def test_preload_must_say_it_was_not_reached(self):
        self.assertEqual(verdicts.jax_preloaded(0, self.PRELOAD).status, PASS)
        self.assertEqual(verdicts.jax_preloaded(0, self.PRELOAD.replace("  try: --mode audit", "")).status, FAIL)
        self.assertEqual(verdicts.jax_preloaded(0, self.PRELOAD.replace("no communicator", "a communicator")).status,
                         FAIL)
        self.assertEqual(verdicts.jax_preloaded(1, self.PRELOAD).status, FAIL)


if __name__ == "__main__":
    unittest.main()


def config_log(rank, passed=True, taken=(30, 12, 0, 0), requested=6, large=6):
    """ctypes_allreduce_config.py's rank: 24 calls, 6 asking for NCCL, 6 others above 8 MiB."""
    return log(setup(rank, 2),
               f"rank {rank}/2: expect requested=6 too-large=6 1shot>=5 2shot>=5",
               f"rank {rank}/2: {'PASS' if passed else 'FAIL'} (24 checks, 0 wrong, 0 events not recorded, NCCL from x)",
               released(rank, 2, taken=taken, forwarded=requested + large,
                        reasons=f"requested={requested} too-large={large}"))


class CtypesConfigTest(unittest.TestCase):
    def test_every_call_counted_as_its_option_asked_passes(self):
        verdict = verdicts.ctypes_config(2, [0, 0], [config_log(r) for r in range(2)])
        self.assertEqual(verdict.status, PASS, verdict.detail)

    def test_an_option_ignored_fails(self):
        # "nccl" ignored: those calls taken instead of forwarded as requested.
        logs = [config_log(r, taken=(36, 12, 0, 0), requested=0) for r in range(2)]
        verdict = verdicts.ctypes_config(2, [0, 0], logs)
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("12 calls forwarded as requested", verdict.detail)
        # "2shot" ignored: the rule chose 1shot for every size up to the limit.
        logs = [config_log(r, taken=(42, 0, 0, 0)) for r in range(2)]
        self.assertIn("2shot took at least", verdicts.ctypes_config(2, [0, 0], logs).detail)

    def test_an_event_not_recorded_fails(self):
        verdict = verdicts.ctypes_config(2, [1, 0], [config_log(0, passed=False), config_log(1)])
        self.assertEqual(verdict.status, FAIL)
        self.assertIn("every completion event recorded", verdict.detail)
