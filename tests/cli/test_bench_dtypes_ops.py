"""nccl-car bench --dtypes with every NCCL type, and --ops: each (dtype, op) is one more part
of the plan, reaches each driver under the name that driver knows, and is kept apart in the
tables, the verdict, the CSV, the chart and saved folders; a folder saved before bench had
--ops still loads, as sums."""

import csv
import json
import os
import re
import shutil
import unittest
import xml.etree.ElementTree as ElementTree

from bench_fixture import FIVE, BenchCase, flat_times

SVG = "{http://www.w3.org/2000/svg}"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# A folder that nccl-car bench --save wrote before it had --ops (format 1): half and float,
# 1K to 4K, one repeat, with what that bench printed and wrote to its CSV.
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
    return [line for line in stdout.splitlines() if line.endswith("(us)")]


class EveryType(BenchCase):
    def test_car_nccl_bench_gets_the_library_names(self):
        result = self.bench("--gpus", "2", "--dtypes", SPELLINGS, "--repeats", "1", "--max-bytes", "1K",
                            canned=flat_times())
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual([run["config"] for run in runs], FIVE * len(EVERY_TYPE))
        self.assertEqual([run["dtype"] for run in runs[::5]], LIBRARY_NAMES)
        for run in runs:
            self.assertIn(f"--type {run['dtype']} --op sum", " ".join(run["args"]))   # sum by default
        self.assertEqual([(row["dtype"], row["op"]) for row in self.csv_rows() if row["mode"] == "eager"],
                         [(name, "sum") for name in TESTS_NAMES])
        self.assertEqual(titles(result.stdout)[:3], ["int8 sum eager: time per all-reduce (us)",
                                                     "int8 sum graph: time per all-reduce (us)",
                                                     "int8 sum host: time to issue one eager call (us)"])
        self.assertEqual(len(titles(result.stdout)), 3 * len(EVERY_TYPE))
        self.assertIn("[60/60] f8e5m2 sum car, repeat 1/1 ...", result.stderr)

    def test_all_reduce_perf_gets_nccl_tests_names(self):
        result = self.bench("--all-reduce-perf", self.perf, "--gpus", "2", "--dtypes", SPELLINGS, "--modes", "eager",
                            "--repeats", "1", "--max-bytes", "1K", canned=flat_times())
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual([run["dtype"] for run in runs[::5]], TESTS_NAMES)
        for run in runs:
            self.assertIn(f"-d {run['dtype']} -o sum -G 0", " ".join(run["args"]))
        self.assertEqual([row["dtype"] for row in self.csv_rows()], TESTS_NAMES)

    def test_a_type_or_op_all_reduce_perf_lacks_fails_its_runs(self):
        # nccl-tests measures float instead of a type it does not know, sum instead of an op:
        # those timings must not appear as the type and op asked for.
        canned = dict(flat_times(), unknown=["f8e5m2", "avg"])
        result = self.bench("--all-reduce-perf", self.perf, "--gpus", "2", "--dtypes", "bf16,fp8e5m2",
                            "--ops", "sum,avg", "--modes", "eager", "--repeats", "1", "--max-bytes", "1K",
                            canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertIn("[6/20] bfloat16 avg eager nccl, repeat 1/1 ... FAILED: measured bfloat16 sum instead of "
                      "bfloat16 avg (all_reduce_perf falls back to float for a type it does not know, to sum "
                      "for an op)", result.stderr)
        self.assertIn("[11/20] f8e5m2 sum eager nccl, repeat 1/1 ... FAILED: measured float sum instead of "
                      "f8e5m2 sum", result.stderr)
        self.assertIn("15 run(s) failed:", result.stdout)
        self.assertEqual([(row["dtype"], row["op"]) for row in self.csv_rows()], [("bfloat16", "sum")])


class Ops(BenchCase):
    def test_every_op_is_one_more_axis_of_the_plan(self):
        canned = dict(flat_times(car=5), offset={"prod": 100, "int32": 1000, "car max": 20})
        result = self.bench("--gpus", "2", "--dtypes", "int32,f8e4m3", "--ops", "avg,prod,max", "--repeats", "2",
                            "--max-bytes", "2K", canned=canned)
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual([run["config"] for run in runs], FIVE * 12)
        self.assertEqual([(run["dtype"], run["op"]) for run in runs[::10]],
                         [(dtype, op) for dtype in ("int32", "fp8e4m3") for op in ("avg", "prod", "max")])
        for run in runs:
            self.assertIn(f"--op {run['op']}", " ".join(run["args"]))
        self.assertIn("[1/60] int32 avg nccl, repeat 1/2 ...", result.stderr)
        self.assertIn("[60/60] f8e4m3 max car, repeat 2/2 ...", result.stderr)
        # Each row has the times of its own dtype and op.
        row = self.csv_row("int32", "eager", 1024, op="prod")
        self.assertEqual((float(row["nccl_us"]), float(row["car_us"])), (1110, 1105))
        row = self.csv_row("f8e4m3", "graph", 2048, op="avg")
        self.assertEqual((float(row["nccl_us"]), float(row["car_us"])), (5, 2.5))
        self.assertEqual(float(self.csv_row("f8e4m3", "host", 1024, op="max")["car_us"]), 2)
        self.assertEqual(len(self.csv_rows()), 2 * 3 * 3 * 2)
        self.assertEqual(titles(result.stdout),
                         [f"{dtype} {op} {mode}: " + ("time to issue one eager call (us)" if mode == "host"
                                                      else "time per all-reduce (us)")
                          for dtype in ("int32", "f8e4m3") for op in ("avg", "prod", "max")
                          for mode in ("eager", "graph", "host")])
        self.assertIn("nccl-car is SLOWER than NCCL's best at: int32 max eager 1K (1.015x, best nccl), "
                      "2K (1.015x, best nccl); int32 max graph 1K (1.015x, best nccl), 2K (1.015x, best nccl); "
                      "f8e4m3 max eager 1K (2.500x, best nccl), 2K (2.500x, best nccl); "
                      "f8e4m3 max graph 1K (2.500x, best nccl), 2K (2.500x, best nccl)\n", result.stdout)

    def test_the_chart_has_a_line_and_a_legend_entry_per_dtype_op_and_mode(self):
        result = self.bench("--gpus", "2", "--dtypes", "int32,f8e4m3,double", "--ops", "avg,prod,max",
                            "--repeats", "1", "--max-bytes", "2K", canned=flat_times())
        self.assertEqual(result.returncode, 0, result.stderr)
        root = ElementTree.parse(self.svg).getroot()
        height = float(root.get("height"))
        texts = {t.text: float(t.get("y")) for t in root.iter(SVG + "text")}
        labels = [f"{dtype} {op} {mode}" for dtype in ("int32", "f8e4m3", "double") for op in ("avg", "prod", "max")
                  for mode in ("eager", "graph", "host")]
        for label in labels:
            self.assertIn(label, texts)
        # 27 entries do not fit one line: the legend wraps and the picture grows to hold it.
        self.assertGreater(len({texts[label] for label in labels}), 1)
        self.assertTrue(all(0 < y < height for y in texts.values()), (height, texts))
        # Per dtype and op: eager and graph, NCCL's best, nccl-car and the ratio; host, NCCL and nccl-car.
        self.assertEqual(len(root.findall(f".//{SVG}polyline")), 9 * (3 + 3 + 2))

    def test_all_reduce_perf_runs_each_op_and_mode(self):
        result = self.bench("--all-reduce-perf", self.perf, "--gpus", "2", "--dtypes", "double", "--ops", "min,avg",
                            "--repeats", "1", "--max-bytes", "1K", canned=dict(flat_times(), offset={"avg": 4}))
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual([(run["op"], run["mode"]) for run in runs[::5]],
                         [("min", "0"), ("min", "10"), ("avg", "0"), ("avg", "10")])
        self.assertIn("-d double -o avg -G 10", " ".join(runs[-1]["args"]))
        self.assertEqual(float(self.csv_row("double", "graph", 1024, op="avg")["car_us"]), 7)
        self.assertEqual(float(self.csv_row("double", "graph", 1024, op="min")["car_us"]), 5)
        self.assertIn("[20/20] double avg graph car, repeat 1/1 ...", result.stderr)


class SavedOps(BenchCase):
    def test_round_trip_keeps_the_ops(self):
        saved = self.path("saved")
        first = self.bench("--gpus", "2", "--dtypes", "half", "--ops", "sum,min", "--max-bytes", "2K",
                           "--repeats", "1", "--save", saved, canned=dict(flat_times(), offset={"car min": 50}))
        self.assertEqual(first.returncode, 0, first.stderr)
        for op in ("sum", "min"):
            for name in FIVE:
                self.assertTrue(os.path.isfile(os.path.join(saved, f"half-{op}", f"{name}.1.out")))
        with open(os.path.join(saved, "bench.json")) as stream:
            manifest = json.load(stream)
        self.assertEqual((manifest["format"], manifest["ops"]), (2, ["sum", "min"]))
        self.assertEqual([run["op"] for run in manifest["runs"]], ["sum"] * 5 + ["min"] * 5)
        self.assertIn("half min eager 1K (6.000x, best nccl)", first.stdout)

        csv_again, svg_again = self.path("again.csv"), self.path("again.svg")
        second = self.bench("--from", saved, "--csv", csv_again, "--svg", svg_again, library=False, outputs=False)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertEqual(second.stdout.replace(csv_again, self.csv).replace(svg_again, self.svg), first.stdout)
        self.assertEqual(self.csv_rows(csv_again), self.csv_rows())

    def test_from_refuses_ops(self):
        result = self.bench("--from", FORMAT_1, "--ops", "max", library=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("drop --ops", result.stderr)

    def test_a_folder_saved_before_ops_loads_as_sums(self):
        folder = self.path("old")
        shutil.copytree(FORMAT_1, folder)
        result = self.bench("--from", folder, library=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.runs(), [])
        # What the bench of that time printed, with the op named.
        with open(FORMAT_1 + ".stdout") as stream:
            then = stream.read()
        then = re.sub(r"\b(half|float) (eager|graph|host)\b", r"\1 sum \2", then)
        then = re.sub(r"^wrote .*$", f"wrote {self.csv} and {self.svg}", then, flags=re.MULTILINE)
        self.assertEqual(result.stdout, then)
        with open(FORMAT_1 + ".csv", newline="") as stream:
            old_rows = list(csv.DictReader(stream))
        rows = self.csv_rows()
        self.assertEqual({row.pop("op") for row in rows}, {"sum"})
        self.assertEqual(rows, old_rows)

    def test_other_formats_and_incomplete_folders_are_refused(self):
        with open(os.path.join(FORMAT_1, "bench.json")) as stream:
            old = json.load(stream)
        missing_op = dict(old, format=2, ops=["sum"])
        cases = [(dict(old, format=3), "in format 3, this bench reads 1 and 2"),
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
