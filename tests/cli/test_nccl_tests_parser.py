"""The nccl-tests 2.x output parser, on output as all_reduce_perf prints it."""

import unittest

import cli_support  # noqa: F401  (puts tools/ on sys.path)
from nccl_car_cli.nccl_tests import parse_output

# all_reduce_perf -b 1K -e 16K -f 2 -g 2 -d bfloat16 -c 1, with NCCL's own INFO lines mixed
# in (NCCL_DEBUG=INFO prints to stdout) and one size whose out-of-place result was wrong.
CHECKED = """\
# nccl-tests version 2.17.1 nccl-headers=22807 nccl-library=22807
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 2 minBytes 1024 maxBytes 16384 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41528 on gpu-node-07 device  0 [0000:18:00] NVIDIA H200
#  Rank  1 Group  0 Pid  41528 on gpu-node-07 device  1 [0000:2a:00] NVIDIA H200
gpu-node-07:41528:41528 [0] NCCL INFO NCCL version 2.28.7+cuda13.0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
        1024           512  bfloat16     sum      -1     9.81    0.10    0.10       0     9.46    0.11    0.11       0
        2048          1024  bfloat16     sum      -1    10.02    0.20    0.20       0     9.77    0.21    0.21       0
        4096          2048  bfloat16     sum      -1    10.35    0.40    0.40       3    10.12    0.40    0.40       0
        8192          4096  bfloat16     sum      -1    11.07    0.74    0.74       0    10.88    0.75    0.75       0
       16384          8192  bfloat16     sum      -1    12.60    1.30    1.30       0    12.41    1.32    1.32       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.552951
#
# Collective test concluded: all_reduce_perf
#
"""

# Same sizes with -c 0: nothing checked, #wrong is N/A; a failed bounds check at the end.
UNCHECKED = """\
# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 0 graph: 10
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           256     float     sum      -1     4.10    0.25    0.00     N/A     0.21    4.88    0.00     N/A
        2048           512     float     sum      -1     4.20    0.49    0.00     N/A     0.22    9.31    0.00     N/A
# Out of bounds values : 2 FAILED
# Avg bus bandwidth    : 0
"""


class ParseOutputTest(unittest.TestCase):
    def test_checked_run(self):
        output = parse_output(CHECKED)
        self.assertEqual([row.size for row in output.rows], [1024, 2048, 4096, 8192, 16384])
        first = output.rows[0]
        self.assertEqual((first.count, first.dtype, first.redop, first.root), (512, "bfloat16", "sum", -1))
        self.assertEqual((first.out_of_place.time_us, first.out_of_place.algbw, first.out_of_place.busbw),
                         (9.81, 0.10, 0.10))
        self.assertEqual(first.in_place.time_us, 9.46)
        self.assertEqual(output.rows[2].out_of_place.wrong, 3)
        self.assertEqual(output.rows[2].in_place.wrong, 0)
        self.assertEqual(output.rows[2].timing(in_place=True).time_us, 10.12)
        self.assertEqual(output.rows[2].timing(in_place=False).time_us, 10.35)
        self.assertEqual((output.out_of_bounds, output.bounds_ok), (0, True))
        self.assertAlmostEqual(output.avg_busbw, 0.552951)

    def test_unchecked_run_and_failed_bounds(self):
        output = parse_output(UNCHECKED)
        self.assertEqual(len(output.rows), 2)
        self.assertIsNone(output.rows[0].out_of_place.wrong)
        self.assertIsNone(output.rows[1].in_place.wrong)
        self.assertEqual(output.rows[1].in_place.time_us, 0.22)
        self.assertEqual((output.out_of_bounds, output.bounds_ok), (2, False))

    def test_no_table(self):
        output = parse_output("gpu-node-07: Test NCCL failure common.cu:1005 'unhandled cuda error'\n"
                              " .. gpu-node-07 pid 41528: Test failure common.cu:891\n")
        self.assertEqual(output.rows, [])
        self.assertIsNone(output.bounds_ok)

    def test_a_million_wrong_elements_or_more_print_as_g(self):
        # all_reduce_perf prints #wrong with %g: 8999977 wrong int8 elements read 9e+06.
        output = parse_output("     8999977       8999977      int8    prod      -1   2841.2    3.17    3.17  9e+06"
                              "   2838.9    3.17    3.17  1.23457e+06\n")
        self.assertEqual((output.rows[0].out_of_place.wrong, output.rows[0].in_place.wrong), (9000000, 1234570))
        self.assertEqual((output.rows[0].dtype, output.rows[0].redop), ("int8", "prod"))

    def test_truncated_line_is_not_data(self):
        output = parse_output("        1024           512      half     sum      -1     9.81    0.10\n")
        self.assertEqual(output.rows, [])


if __name__ == "__main__":
    unittest.main()
