"""nccl-car tune end to end without a GPU: the fake car_nccl_bench (fake_bench_program.py)
times and traces, the fake query (fake_query.py) answers the fingerprint and hands every
other command to this build's query program, so the table tune writes is read back by the
library's own parser."""

import json
import os
import sys
import unittest

from bench_fixture import BenchCase
from cli_support import QUERY_PROGRAM, clean_env, query_program, run_tool, write_script

FAKE_QUERY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_query.py")
FINGERPRINT = "00c0ffee00c0ffee"
# Eager us = fixed + per_kib * KiB, graph half that. NCCL 10 us flat; 1shot 5 + 1/KiB wins
# up to 1 KiB, 2shot 8 + 0.2/KiB at 4 KiB, NCCL from 16 KiB; the all-gather and reduce-scatter
# ("car": the library's own kernel) 6 us flat.
TIMES = {"times": {"nccl": [[10, 0]], "car-1shot": [[5, 1]], "car-2shot": [[8, 0.2]], "car": [[6, 0]]}}
ONE_GROUP = ("--collectives", "all-reduce", "--families", "half")


class TuneCase(BenchCase):
    def setUp(self):
        super().setUp()
        self.cache = self.path("cache")
        self.mps = self.path("mps")
        os.makedirs(self.mps)
        open(os.path.join(self.mps, "control"), "w").close()   # what --one-gpu looks for
        self.query_log = self.path("query.jsonl")
        self.query = write_script(self.path("nccl_car_query"),
                                  f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_QUERY}" "$@"\n')

    def tune(self, *options, canned=None, ranks="2"):
        query_program(self)   # the table is read back by this build's query program
        with open(self.canned, "w") as stream:
            json.dump(canned or TIMES, stream)
        env = clean_env(FAKE_BENCH_CONFIG=self.canned, FAKE_BENCH_LOG=self.log, FAKE_QUERY_REAL=QUERY_PROGRAM,
                        FAKE_QUERY_LOG=self.query_log, FAKE_FINGERPRINT=FINGERPRINT, NCCL_CAR_QUERY=self.query,
                        XDG_CACHE_HOME=self.cache, CUDA_MPS_PIPE_DIRECTORY=self.mps)
        return run_tool("tune", "--lib", self.library, "--one-gpu", "--ranks", ranks, "--repeats", "1",
                        "--seed", "5", *options, env=env)

    @property
    def table_path(self):
        return os.path.join(self.cache, "nccl-car", FINGERPRINT + ".table")

    def table_rows(self):
        answer = query_program(self).table(clean_env(), self.table_path, FINGERPRINT)
        self.assertTrue(answer["usable"], answer["why"])
        return [(row["collective"], row["ranks"], row["family"], row["from"], row["to"], row["winner"])
                for row in answer["rows"]]


class TuneTest(TuneCase):
    def test_writes_the_winners_where_the_library_looks_and_the_library_follows_them(self):
        result = self.tune(*ONE_GROUP)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(self.table_rows(), [("all-reduce", 2, "half", 0, 2048, "1shot"),
                                             ("all-reduce", 2, "half", 2049, 8192, "2shot"),
                                             ("all-reduce", 2, "half", 8193, 8 << 20, "nccl")])
        self.assertIn("the library follows the table at every size measured", result.stdout)
        # The fingerprint is the one of the NCCL the runs loaded (their header says 22809).
        with open(self.query_log) as log:
            self.assertEqual([json.loads(line) for line in log], [["fingerprint", "--device", "0",
                                                                    "--nccl-version", "22809"]])

    def test_runs_are_isolated_calls_of_each_kernel_and_nccl_alone_never_under_a_table(self):
        self.tune(*ONE_GROUP)
        runs = self.runs(probes=True)
        self.assertEqual(sorted((run["config"], run["probe"]) for run in runs),
                         [("car", True), ("car-1shot", False), ("car-1shot", True), ("car-2shot", False),
                          ("car-2shot", True), ("nccl", False)])
        for run in runs:
            self.assertEqual(run["args"][run["args"].index("--modes") + 1] if "--modes" in run["args"] else None,
                             None if run["probe"] else "isolated")
            self.assertNotIn("chain", " ".join(run["args"]))
            if run["config"] == "nccl":
                self.assertNotIn("libnccl-car.so", run["env"]["LD_PRELOAD"] or "")
            elif run["env"]["NCCL_CAR_TABLE"] != self.table_path:
                # Measuring: an older table must not choose for the kernels being timed.
                self.assertEqual(run["env"]["NCCL_CAR_TABLE"], "builtin")
            if run["probe"] and run["config"] != "nccl":
                self.assertEqual(run["env"]["NCCL_CAR_DEBUG"], "TRACE")
        # The last run follows the table that was written.
        self.assertEqual((runs[-1]["config"], runs[-1]["env"]["NCCL_CAR_TABLE"]), ("car", self.table_path))

    def test_a_kernel_that_did_not_take_the_call_never_wins(self):
        # car-1shot's calls above 256 B went to NCCL: its fast times there are not its own.
        canned = dict(TIMES, takes={"car-1shot": 256})
        result = self.tune(*ONE_GROUP, canned=canned)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(self.table_rows()[:2], [("all-reduce", 2, "half", 0, 512, "1shot"),
                                                 ("all-reduce", 2, "half", 513, 8192, "2shot")])

    def test_a_library_that_does_not_follow_the_table_fails(self):
        result = self.tune(*ONE_GROUP, canned=dict(TIMES, ignore_table=True))
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("the library does not follow the table", result.stdout)
        self.assertIn("the table says nccl, the library ran 1shot", result.stdout)

    def test_a_wrong_result_writes_no_table(self):
        result = self.tune(*ONE_GROUP, canned=dict(TIMES, wrong={"car-2shot": 4096}))
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("wrong results at 4096 bytes", result.stderr)
        self.assertFalse(os.path.exists(self.table_path))

    def test_the_all_gather_is_one_group_for_every_type_in_whole_messages(self):
        result = self.tune("--collectives", "all-gather", ranks="4")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        rows = self.table_rows()
        self.assertEqual({(c, r, f, w) for c, r, f, _low, _high, w in rows}, {("all-gather", 4, "any", "allgather")})
        # The smallest message is one bf16 element per rank, the largest the library's limit.
        self.assertEqual((rows[0][3], rows[-1][4]), (0, 1 << 20))
        sizes = self.runs()[0]["args"]
        self.assertEqual(sizes[sizes.index("--sizes") + 1].split(",")[0], "16")

    def test_every_family_of_the_reduce_scatter_and_each_world_size(self):
        result = self.tune("--collectives", "reduce-scatter", ranks="2,4")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(sorted({(r, f) for _c, r, f, *_rest in self.table_rows()}),
                         [(world, family) for world in (2, 4) for family in ("float", "fp8", "half", "split")])

    def test_an_output_path_and_an_unknown_collective(self):
        output = self.path("mine.table")
        result = self.tune(*ONE_GROUP, "--output", output, "--no-verify")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertTrue(os.path.exists(output))
        self.assertFalse(os.path.exists(self.table_path))
        result = self.tune("--collectives", "broadcast")
        self.assertEqual(result.returncode, 2)
        self.assertIn("unknown collective broadcast", result.stderr)


    def test_its_own_options_are_checked_before_the_gpus_are_counted(self):
        """Issue 47: tune said "needs 2 or more GPUs" before it looked at a wrong option."""
        query_program(self)
        env = clean_env(NCCL_CAR_QUERY=QUERY_PROGRAM, CUDA_VISIBLE_DEVICES="")
        wrong = run_tool("tune", "--lib", self.library, "--collectives", "broadcast", env=env)
        self.assertEqual(wrong.returncode, 2, wrong.stderr)
        self.assertIn("unknown collective broadcast", wrong.stderr)
        self.assertNotIn("GPUs", wrong.stderr)
        right = run_tool("tune", "--lib", self.library, *ONE_GROUP, env=env)
        self.assertEqual(right.returncode, 3, right.stderr)
        self.assertIn("tune needs 2 or more GPUs; 0 visible", right.stderr)


if __name__ == "__main__":
    unittest.main()
