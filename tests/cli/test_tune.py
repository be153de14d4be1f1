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

    def tune(self, *options, canned=None, ranks="2", **extra):
        query_program(self)   # the table is read back by this build's query program
        with open(self.canned, "w") as stream:
            json.dump(canned or TIMES, stream)
        env = clean_env(FAKE_BENCH_CONFIG=self.canned, FAKE_BENCH_LOG=self.log, FAKE_QUERY_REAL=QUERY_PROGRAM,
                        FAKE_QUERY_LOG=self.query_log, FAKE_FINGERPRINT=FINGERPRINT, NCCL_CAR_QUERY=self.query,
                        XDG_CACHE_HOME=self.cache, CUDA_MPS_PIPE_DIRECTORY=self.mps, TMPDIR=self.path(""), **extra)
        return run_tool("tune", "--lib", self.library, "--one-gpu", "--ranks", ranks, "--repeats", "1",
                        "--seed", "5", *options, env=env)

    @property
    def table_path(self):
        return os.path.join(self.cache, "nccl-car", FINGERPRINT + ".table")

    def table_rows(self):
        answer = query_program(self).table(clean_env(), self.table_path, FINGERPRINT)
        self.assertTrue(answer["usable"], answer["why"])
        return [(row["collective"], row["ranks"], row["links"], row["family"], row["from"], row["to"], row["winner"])
                for row in answer["rows"]]


class TuneTest(TuneCase):
    def test_writes_the_winners_where_the_library_looks_and_the_library_follows_them(self):
        result = self.tune(*ONE_GROUP)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(self.table_rows(), [("all-reduce", 2, "nvlink", "half", 0, 2048, "1shot"),
                                             ("all-reduce", 2, "nvlink", "half", 2049, 8192, "2shot"),
                                             ("all-reduce", 2, "nvlink", "half", 8193, 8 << 20, "nccl")])
        self.assertIn("tune: 2 ranks: NVLink", result.stdout)
        self.assertIn("the library follows the table at every size measured", result.stdout)
        # The fingerprint is the one of the NCCL the runs loaded (their header says 22809).
        with open(self.query_log) as log:
            self.assertEqual([json.loads(line) for line in log], [["fingerprint", "--device", "0",
                                                                    "--nccl-version", "22809"]])

    def test_runs_are_isolated_calls_of_each_kernel_and_nccl_alone_never_under_a_table(self):
        self.tune(*ONE_GROUP)
        runs = self.runs(probes=True)
        # The first run says which case 2 ranks are (the library's setup: line); the last follows the table.
        self.assertEqual(sorted((run["config"], run["probe"]) for run in runs),
                         [("car", True), ("car", True), ("car-1shot", False), ("car-1shot", True),
                          ("car-2shot", False), ("car-2shot", True), ("nccl", False)])
        self.assertEqual((runs[0]["config"], runs[0]["probe"], runs[0]["env"]["NCCL_CAR_TABLE"]), ("car", True, "builtin"))
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
        self.assertEqual(self.table_rows()[:2], [("all-reduce", 2, "nvlink", "half", 0, 512, "1shot"),
                                                 ("all-reduce", 2, "nvlink", "half", 513, 8192, "2shot")])

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
        self.assertEqual({(c, r, f, w) for c, r, _l, f, _low, _high, w in rows}, {("all-gather", 4, "any", "allgather")})
        # The smallest message is one bf16 element per rank, the largest the library's limit.
        self.assertEqual((rows[0][4], rows[-1][5]), (0, 1 << 20))
        sizes = self.runs()[0]["args"]
        self.assertEqual(sizes[sizes.index("--sizes") + 1].split(",")[0], "16")

    def test_every_family_of_the_reduce_scatter_and_each_world_size(self):
        result = self.tune("--collectives", "reduce-scatter", ranks="2,4")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(sorted({(r, f) for _c, r, _l, f, *_rest in self.table_rows()}),
                         [(world, family) for world in (2, 4) for family in ("float", "fp8", "half", "split")])

    def test_over_pcie_only_push_kernels_are_timed_and_the_rows_say_pcie(self):
        # Pull buffers exist (a lowered push limit): over NVLink 1stage and 2stage are timed too.
        canned = dict(TIMES, links="pcie")
        canned["times"] = dict(TIMES["times"], **{"car-1stage": [[1, 0]], "car-2stage": [[1, 0]]})
        result = self.tune(*ONE_GROUP, canned=canned, NCCL_CAR_PUSH_MAX_BYTES="4194304")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("tune: 2 ranks: PCIe (push kernels only)", result.stdout)
        self.assertEqual({config for config in (run["config"] for run in self.runs(probes=True))},
                         {"car", "car-1shot", "car-2shot", "nccl"})
        self.assertEqual(self.table_rows(), [("all-reduce", 2, "pcie", "half", 0, 2048, "1shot"),
                                             ("all-reduce", 2, "pcie", "half", 2049, 8192, "2shot"),
                                             ("all-reduce", 2, "pcie", "half", 8193, 8 << 20, "nccl")])
        self.assertIn("the library follows the table at every size measured", result.stdout)
        self.assertIn("all-reduce, 2 ranks over PCIe, half (bfloat16)", result.stdout)

    def test_over_pcie_the_all_gather_is_timed_under_a_table_of_tunes_own(self):
        # The library has no size of its own over PCIe: the runs that time its kernel follow a
        # table giving it every size; the verifying run follows the table written.
        result = self.tune("--collectives", "all-gather", canned=dict(TIMES, links="pcie"), ranks="4")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        rows = self.table_rows()
        self.assertEqual({(c, r, l, w) for c, r, l, _f, _low, _high, w in rows}, {("all-gather", 4, "pcie", "allgather")})
        tables = {run["env"]["NCCL_CAR_TABLE"] for run in self.runs(probes=True) if run["config"] == "car"}
        own = [path for path in tables if path not in ("builtin", self.table_path)]
        self.assertEqual(len(own), 1, tables)
        self.assertFalse(os.path.exists(own[0]))   # removed once tune is done
        # One fingerprint for tune's own table and the one written.
        with open(self.query_log) as log:
            self.assertEqual(len(log.readlines()), 1)

    def test_a_world_size_the_library_does_not_take_is_not_measured(self):
        result = self.tune(*ONE_GROUP, canned=dict(TIMES, not_eligible="rank 0 and rank 1 are on different CPU "
                                                                    "sockets (PCIe path SYS); ..."))
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertIn("tune: 2 ranks: the library takes no communicator here (rank 0 and rank 1 are on different CPU "
                      "sockets", result.stdout)
        self.assertIn("nothing to measure", result.stderr)
        self.assertEqual(len(self.runs(probes=True)), 1)
        self.assertFalse(os.path.exists(self.table_path))

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
