"""nccl-car bench --dtypes with every NCCL type, and --ops: each (dtype, op) is one more part
of the plan, reaches each driver under the name that driver knows, and is kept apart in the
tables, the verdict, the CSV and saved folders; a folder saved before bench had --ops or the
modes still loads, as sums of back-to-back calls whose graph and host rows were never checked."""

import csv
import json
import os
import shutil
import unittest

from bench_fixture import SIX, BenchCase, flat_times

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# A folder that nccl-car bench --save wrote before it had --ops (format 1): half and float,
# 1K to 4K, one repeat, with the CSV that bench wrote.
FORMAT_1 = os.path.join(DATA, "bench-format1")

# The spelling given to --dtypes (the library's and nccl-tests' mixed), nccl-tests' name (what
# bench keeps, and all_reduce_perf -d), the library's name (car_nccl_bench --type).
EVERY_TYPE = (("int8", "int8", "int8"), ("uint8", "uint8", "uint8"), ("int32", "int32", "int32"),
              ("uint32", "uint32", "uint32"), ("int64", "int64", "int64"), ("uint64", "uint64", "uint64"),
              ("fp16", "half", "fp16"), ("bfloat16", "bfloat16", "bf16"), ("float32", "float", "fp32"),
              ("fp64", "double", "fp64"), ("f8e4m3", "f8e4m3", "fp8e4m3"), ("fp8e5m2", "f8e5m2", "fp8e5m2"))
SPELLINGS = ",".join(spelling for spelling, _tests, _library in EVERY_TYPE)
TESTS_NAMES = [tests for _spelling, tests, _library in EVERY_TYPE]
LIBRARY_NAMES = [library for _spelling, _tests, library in EVERY_TYPE]


def titles(stdout):
    return [line.split(":")[0] for line in stdout.splitlines() if "median and lowest-highest" in line]


class EveryType(BenchCase):
    def test_car_nccl_bench_gets_the_library_names(self):
        result = self.quick("--dtypes", SPELLINGS)
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual(len(runs), 6 * len(EVERY_TYPE))
        self.assertEqual([run["dtype"] for run in runs[::6]], LIBRARY_NAMES)
        for run in runs:
            self.assertIn(f"--type {run['dtype']} --op sum", " ".join(run["args"]))   # sum by default
        self.assertEqual([(row["dtype"], row["op"]) for row in self.csv_rows() if row["mode"] == "isolated-eager"],
                         [(name, "sum") for name in TESTS_NAMES])
        self.assertEqual(titles(result.stdout)[:3], ["int8 sum, plain (out of place, one stream), isolated-graph",
                                                     "int8 sum, plain (out of place, one stream), isolated-eager",
                                                     "int8 sum, plain (out of place, one stream), host"])
        self.assertEqual(len(titles(result.stdout)), 3 * len(EVERY_TYPE))
        self.assertIn("[72/72] f8e5m2 sum ", result.stderr)

    def test_all_reduce_perf_gets_nccl_tests_names(self):
        result = self.bench("--all-reduce-perf", self.perf, "--gpus", "2", "--dtypes", SPELLINGS,
                            "--repeats", "1", "--max-bytes", "1K", canned=flat_times())
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual([run["dtype"] for run in runs[::12]], TESTS_NAMES)   # 6 configurations, 2 forms
        for run in runs:
            self.assertRegex(" ".join(run["args"]), f"-d {run['dtype']} -o sum -G (0|10)")
        self.assertEqual([row["dtype"] for row in self.csv_rows() if row["mode"] == "chain-eager"], TESTS_NAMES)

    def test_a_type_or_op_all_reduce_perf_lacks_fails_its_runs(self):
        # nccl-tests measures float instead of a type it does not know, sum instead of an op:
        # those timings must not appear as the type and op asked for.
        canned = dict(flat_times(), unknown=["f8e5m2", "avg"])
        result = self.bench("--all-reduce-perf", self.perf, "--gpus", "2", "--dtypes", "bf16,fp8e5m2",
                            "--ops", "sum,avg", "--repeats", "1", "--max-bytes", "1K", canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"bfloat16 avg chain-graph nccl, repeat 1/1 \.\.\. FAILED: measured bfloat16 "
                                        r"sum instead of bfloat16 avg \(all_reduce_perf falls back to float for a type "
                                        r"it does not know, to sum for an op\)")
        self.assertRegex(result.stderr, r"f8e5m2 sum chain-eager nccl, repeat 1/1 \.\.\. FAILED: measured float sum "
                                        r"instead of f8e5m2 sum")
        self.assertIn("36 run(s) failed:", result.stdout)
        self.assertEqual({(row["dtype"], row["op"]) for row in self.csv_rows()}, {("bfloat16", "sum")})


class Ops(BenchCase):
    def test_every_op_is_one_more_axis_of_the_plan(self):
        canned = dict(flat_times(car=5), offset={"prod": 100, "int32": 1000, "car max": 20})
        result = self.quick("--dtypes", "int32,f8e4m3", "--ops", "avg,prod,max", "--repeats", "2", "--sizes", "1K,2K",
                            canned=canned)
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual(len(runs), 6 * 2 * 6)
        self.assertEqual([(run["dtype"], run["op"]) for run in runs[::12]],
                         [(dtype, op) for dtype in ("int32", "fp8e4m3") for op in ("avg", "prod", "max")])
        for run in runs:
            self.assertIn(f"--op {run['op']}", " ".join(run["args"]))
        self.assertRegex(result.stderr, r"\[1/72\] int32 avg \S+, repeat 1/2 \.\.\.")
        self.assertRegex(result.stderr, r"\[72/72\] f8e4m3 max \S+, repeat 2/2 \.\.\.")
        # Each row has the times of its own dtype and op.
        row = self.csv_row("int32", "isolated-eager", 1024, op="prod")
        self.assertEqual((float(row["nccl_us"]), float(row["car_us"])), (1110, 1105))
        row = self.csv_row("f8e4m3", "isolated-graph", 2048, op="avg")
        self.assertEqual((float(row["nccl_us"]), float(row["car_us"])), (5, 2.5))
        self.assertEqual(float(self.csv_row("f8e4m3", "host", 1024, op="max")["car_us"]), 2)
        self.assertEqual(len(self.csv_rows()), 2 * 3 * 3 * 2)
        self.assertEqual(titles(result.stdout),
                         [f"{dtype} {op}, plain (out of place, one stream), {mode}"
                          for dtype in ("int32", "f8e4m3") for op in ("avg", "prod", "max")
                          for mode in ("isolated-graph", "isolated-eager", "host")])
        self.assertIn("nccl-car is SLOWER than NCCL's best at: int32 max plain isolated-graph 1K (1.015x, best nccl), "
                      "2K (1.015x, best nccl); int32 max plain isolated-eager 1K (1.015x, best nccl), "
                      "2K (1.015x, best nccl); f8e4m3 max plain isolated-graph 1K (2.500x, best nccl), "
                      "2K (2.500x, best nccl); f8e4m3 max plain isolated-eager 1K (2.500x, best nccl), "
                      "2K (2.500x, best nccl)\n", result.stdout)

    def test_all_reduce_perf_runs_each_op_and_form(self):
        result = self.bench("--all-reduce-perf", self.perf, "--gpus", "2", "--dtypes", "double", "--ops", "min,avg",
                            "--repeats", "1", "--max-bytes", "1K", canned=dict(flat_times(), offset={"avg": 4}))
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual([(run["op"], run["mode"]) for run in runs[::6]],
                         [("min", "10"), ("min", "0"), ("avg", "10"), ("avg", "0")])
        self.assertIn("-d double -o avg -G 0", " ".join(runs[-1]["args"]))
        self.assertEqual(float(self.csv_row("double", "chain-graph", 1024, op="avg")["car_us"]), 7)
        self.assertEqual(float(self.csv_row("double", "chain-graph", 1024, op="min")["car_us"]), 5)
        self.assertRegex(result.stderr, r"\[24/24\] double avg chain-eager \S+, repeat 1/1 \.\.\.")


class SavedOps(BenchCase):
    def test_round_trip_keeps_the_ops(self):
        saved = self.path("saved")
        first = self.quick("--ops", "sum,min", "--sizes", "1K,2K", "--save", saved,
                           canned=dict(flat_times(), offset={"car min": 50}))
        self.assertEqual(first.returncode, 0, first.stderr)
        for op in ("sum", "min"):
            for name in SIX:
                self.assertTrue(os.path.isfile(os.path.join(saved, f"half-{op}", f"{name}.1.out")))
        with open(os.path.join(saved, "bench.json")) as stream:
            manifest = json.load(stream)
        self.assertEqual((manifest["format"], manifest["ops"]), (3, ["sum", "min"]))
        self.assertEqual([run["op"] for run in manifest["runs"]], ["sum"] * 6 + ["min"] * 6)
        self.assertIn("half min plain isolated-eager 1K (6.000x, best nccl)", first.stdout)

        csv_again = self.path("again.csv")
        second = self.bench("--from", saved, "--csv", csv_again, "--chart", self.chart, library=False, outputs=False)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertEqual(second.stdout.replace(csv_again, self.csv), first.stdout)
        self.assertEqual(self.csv_rows(csv_again), self.csv_rows())

    def test_from_refuses_ops(self):
        result = self.bench("--from", FORMAT_1, "--ops", "max", library=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("drop --ops", result.stderr)

    def test_a_folder_saved_before_ops_loads_as_sums_of_chains_partly_unchecked(self):
        folder = self.path("old")
        shutil.copytree(FORMAT_1, folder)
        result = self.bench("--from", folder, library=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.runs(), [])
        # The figures that bench wrote to its CSV, now as sums of back-to-back calls.
        with open(FORMAT_1 + ".csv", newline="") as stream:
            old_rows = list(csv.DictReader(stream))
        legacy = {"eager": "chain-eager", "graph": "chain-graph", "host": "host"}
        for old in old_rows:
            with self.subTest(dtype=old["dtype"], mode=old["mode"], size=old["size_bytes"]):
                row = self.csv_row(old["dtype"], legacy[old["mode"]], int(old["size_bytes"]))
                for name in ("nccl", "nccl-R2", "nccl-gm0", "nccl-R2-gm0", "car"):
                    self.assertEqual(row[f"{name}_us"], old[f"{name}_us"])
                self.assertEqual((row["nccl_best_us"], row["nccl_best_config"]),
                                 (old["nccl_best_us"], old["nccl_best_config"]))
                # Only the eager calls were ever checked, once per size before the timing.
                self.assertEqual(row["checked"], "once" if old["mode"] == "eager" else "no")
        self.assertIn("in fixed order", result.stdout)
        self.assertIn("NOT CHECKED (their outputs were never compared): half sum plain chain-graph 1K, 2K, 4K; "
                      "half sum plain host 1K, 2K, 4K; float sum plain chain-graph", result.stdout)

    def test_other_formats_and_incomplete_folders_are_refused(self):
        with open(os.path.join(FORMAT_1, "bench.json")) as stream:
            old = json.load(stream)
        missing_op = dict(old, format=2, ops=["sum"])
        cases = [(dict(old, format=4), "in format 4, this bench reads 1, 2, 3"),
                 (dict(old, format=2), "KeyError('ops')"),                      # format 2 names its ops
                 (missing_op, "KeyError('op')")]                                # and each run's
        for manifest, message in cases:
            with self.subTest(message=message):
                folder = self.path("folder")
                shutil.rmtree(folder, ignore_errors=True)
                shutil.copytree(FORMAT_1, folder)
                with open(os.path.join(folder, "bench.json"), "w") as stream:
                    json.dump(manifest, stream)
                result = self.bench("--from", folder, library=False)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(message, result.stderr)
                self.assertNotIn("Traceback", result.stderr)


if __name__ == "__main__":
    unittest.main()
