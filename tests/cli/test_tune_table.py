"""tune_table: the rule that turns medians into a winner per size, and sizes into rows."""

import unittest

import cli_support  # noqa: F401  (puts tools/ on the path)
from nccl_car_cli.tune_table import (NCCL, NVLINK, PCIE, Group, TableRow, decide, probe_table_text, rows_of,
                                     size_ranges, table_text, winner_at)

FORMS = ["isolated-graph", "isolated-eager"]


def medians(**configs):
    """medians(nccl=(graph, eager), car_1shot=(graph, eager), ...)"""
    return {name.replace("_", "-"): dict(zip(FORMS, values)) for name, values in configs.items()}


class DecideTest(unittest.TestCase):
    def test_the_fastest_kernel_below_nccl_in_every_form_wins(self):
        verdict = decide(64, medians(nccl=(4, 6), car_1shot=(2, 3), car_2shot=(3, 4)),
                         {"car-1shot": "1shot", "car-2shot": "2shot"}, FORMS)
        self.assertEqual((verdict.winner, verdict.ratio), ("1shot", 0.5))

    def test_the_worse_form_decides(self):
        # 2shot is far ahead in graphs but only just ahead eager; 1shot is ahead in both by more.
        verdict = decide(64, medians(nccl=(10, 10), car_1shot=(8, 8), car_2shot=(2, 9)),
                         {"car-1shot": "1shot", "car-2shot": "2shot"}, FORMS)
        self.assertEqual(verdict.winner, "1shot")

    def test_slower_in_one_form_goes_to_nccl(self):
        verdict = decide(64, medians(nccl=(10, 10), car_1shot=(2, 10.5)), {"car-1shot": "1shot"}, FORMS)
        self.assertEqual((verdict.winner, verdict.ratio), (NCCL, None))

    def test_a_tie_goes_to_nccl(self):
        self.assertEqual(decide(64, medians(nccl=(5, 5), car_1shot=(5, 5)), {"car-1shot": "1shot"}, FORMS).winner,
                         NCCL)

    def test_a_configuration_whose_calls_were_not_taken_never_wins(self):
        # Its times were NCCL's: no kernel of ours ran them.
        self.assertEqual(decide(64, medians(nccl=(5, 5), car_1shot=(1, 1)), {}, FORMS).winner, NCCL)

    def test_a_missing_time_rules_the_kernel_out(self):
        times = medians(nccl=(5, 5), car_1shot=(1, 1))
        del times["car-1shot"]["isolated-eager"]
        self.assertEqual(decide(64, times, {"car-1shot": "1shot"}, FORMS).winner, NCCL)

    def test_the_winner_is_the_kernel_that_ran(self):
        # The library's own choice (the all-gather's): the traced kernel's name, not the configuration's.
        self.assertEqual(decide(64, medians(nccl=(5, 5), car=(1, 1)), {"car": "allgather"}, FORMS).winner,
                         "allgather")


class RowsTest(unittest.TestCase):
    def test_each_size_covers_its_neighbours_on_a_log_scale(self):
        self.assertEqual(size_ranges([4, 16, 64]), [(0, 8), (9, 32), (33, 64)])
        self.assertEqual(size_ranges([1024]), [(0, 1024)])

    def test_neighbours_with_one_winner_make_one_row(self):
        group = Group("all-reduce", 2, "half", "bfloat16")
        winners = {4: "1shot", 16: "1shot", 64: "2shot", 256: NCCL, 1024: NCCL}
        verdicts = [decide(size, medians(nccl=(5, 5), car_k=(1, 1)) if kernel != NCCL else medians(nccl=(5, 5)),
                           {"car-k": kernel} if kernel != NCCL else {}, FORMS) for size, kernel in winners.items()]
        rows = rows_of(group, reversed(verdicts))
        self.assertEqual([(row.low, row.high, row.winner) for row in rows],
                         [(0, 32, "1shot"), (33, 128, "2shot"), (129, 1024, NCCL)])
        self.assertEqual([len(row.verdicts) for row in rows], [2, 1, 2])

    def test_the_text_is_the_format_with_a_comment_per_row(self):
        group = Group("all-gather", 4, "any", "bfloat16")
        verdict = decide(64, medians(nccl=(4, 4), car=(2, 3)), {"car": "allgather"}, FORMS)
        text = table_text("0123456789abcdef", "a machine", ["a note"], [TableRow(group, 0, 64, "allgather", [verdict])])
        self.assertEqual(text.splitlines(), [
            "nccl-car choice table 2", "fingerprint 0123456789abcdef", "machine a machine", "# a note",
            "# 64 B: allgather at 0.75 of NCCL's time (the worse form)", "all-gather 4 nvlink any 0 64 allgather"])

    def test_a_group_measured_over_pcie_writes_pcie_rows(self):
        group = Group("all-reduce", 8, "half", "bfloat16", PCIE)
        verdict = decide(64, medians(nccl=(4, 4), car_1shot=(2, 3)), {"car-1shot": "1shot"}, FORMS)
        self.assertEqual(TableRow(group, 0, 64, "1shot", [verdict]).line(), "all-reduce 8 pcie half 0 64 1shot")
        self.assertEqual(group.describe(), "all-reduce, 8 ranks over PCIe, half (bfloat16)")

    def test_winners_are_found_by_the_case_too(self):
        rows = [{"collective": "all-reduce", "ranks": 2, "links": "pcie", "family": "half", "from": 0, "to": 64,
                 "winner": "1shot"}]
        self.assertEqual(winner_at(rows, "all-reduce", 2, PCIE, "half", 64), "1shot")
        self.assertIsNone(winner_at(rows, "all-reduce", 2, NVLINK, "half", 64))
        self.assertIsNone(winner_at(rows, "all-reduce", 4, PCIE, "half", 64))

    def test_tunes_own_table_gives_the_kernel_every_size(self):
        text = probe_table_text("0123456789abcdef", "all-gather", 4, PCIE, "allgather", 1 << 20)
        self.assertEqual(text.splitlines()[0], "nccl-car choice table 2")
        self.assertEqual(text.splitlines()[-1], "all-gather 4 pcie any 0 1048576 allgather")


if __name__ == "__main__":
    unittest.main()
