"""nccl-car bench, end to end, with a fake all_reduce_perf that prints a canned table."""

import csv
import json
import os
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

from cli_support import clean_env, run_tool, stand_in_library, write_script

# Stands in for nccl-tests' all_reduce_perf. Every run appends what it was given to
# $FAKE_PERF_LOG. Its out-of-place time for size S is base * S / 1 KiB, base taken from
# $FAKE_PERF_CONFIG's "without" or "with" list (is libnccl-car.so in LD_PRELOAD?), indexed
# by how many runs of that side, dtype and -G value came before. In-place times are 1000x.
FAKE_PERF = """\
#!{python}
import json, os, sys, time
options = dict(zip(sys.argv[1::2], sys.argv[2::2]))
config = json.load(open(os.environ["FAKE_PERF_CONFIG"]))
log = os.environ["FAKE_PERF_LOG"]
with_car = "libnccl-car.so" in os.environ.get("LD_PRELOAD", "")
side = "with" if with_car else "without"
earlier = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
index = sum(1 for r in earlier if (r["d"], r["G"], r["with"]) == (options["-d"], options["-G"], with_car))
with open(log, "a") as stream:
    stream.write(json.dumps({{"argv": sys.argv[1:], "d": options["-d"], "G": options["-G"], "with": with_car,
                             "preload": os.environ.get("LD_PRELOAD"),
                             "debug": os.environ.get("NCCL_CAR_DEBUG")}}) + "\\n")
time.sleep(config.get("sleep", 0))
if config.get("fail_" + side):
    print("node: Test NCCL failure common.cu:1005 'unhandled system error'")
    sys.exit(2)
wrong = config.get("wrong_" + side, 0)
base = config[side][index]
element = {{"half": 2, "bfloat16": 2, "float": 4}}[options["-d"]]
print("# nThread 1 nGpus " + options["-g"] + " minBytes " + options["-b"] + " maxBytes " + options["-e"])
print("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong")
print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)")
size = int(options["-b"])
while size <= int(options["-e"]):
    t = base * size / 1024
    print(f"{{size:>12}} {{size // element:>13}} {{options['-d']:>9}}     sum      -1 {{t:8.2f}}    0.10    0.20 {{wrong:>6}} "
          f"{{1000 * t:8.2f}}    0.10    0.20 {{wrong:>6}}")
    size *= int(options["-f"])
print("# Out of bounds values : 0 OK")
print("# Avg bus bandwidth    : 0.2")
if with_car:
    sys.stderr.write("node:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/2 setup: eligible (same-process peers, full nvlink, "
                     "up to 8388608 bytes)\\n"
                     "node:1:2 [0] NCCL-CAR INFO comm 0x1 rank 0/2 released: taken 1shot=0 2shot=0 1stage=5 2stage=1 (4096 bytes) "
                     "forwarded 2 (too-large=2)\\n")
"""

# Stands in for mpirun: records its own LD_PRELOAD, drops "-np N" and runs the rest.
FAKE_LAUNCHER = """\
#!/bin/sh
echo "${{LD_PRELOAD:-none}}" >> {record}
shift 2
exec "$@"
"""


class BenchTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        folder = self.folder.name
        self.library = stand_in_library(folder)
        self.perf = write_script(os.path.join(folder, "all_reduce_perf"), FAKE_PERF.format(python=sys.executable))
        self.log = os.path.join(folder, "runs.jsonl")
        self.config = os.path.join(folder, "config.json")
        self.csv = os.path.join(folder, "out.csv")
        self.svg = os.path.join(folder, "out.svg")

    def tearDown(self):
        self.folder.cleanup()

    def bench(self, *options, config=None, perf_option=True, **env):
        with open(self.config, "w") as stream:
            json.dump(config or {"without": [10, 30, 20], "with": [5, 100, 6]}, stream)
        perf = ["--all-reduce-perf", self.perf] if perf_option else []
        return run_tool("bench", *perf, "--lib", self.library, "--csv", self.csv, "--svg", self.svg, *options,
                        env=clean_env(FAKE_PERF_CONFIG=self.config, FAKE_PERF_LOG=self.log, **env))

    def runs(self):
        with open(self.log) as stream:
            return [json.loads(line) for line in stream]

    def csv_rows(self):
        with open(self.csv, newline="") as stream:
            return list(csv.DictReader(stream))

    def test_alternates_and_reports_medians(self):
        result = self.bench("--gpus", "2", "--dtypes", "half,fp32", "--max-bytes", "4K",
                            LD_PRELOAD=self.library)  # left over from the user: not in the baseline
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual(len(runs), 2 * 2 * 3 * 2)  # dtypes x modes x repeats x sides
        self.assertEqual([r["with"] for r in runs], [False, True] * 12)
        self.assertEqual([(r["d"], r["G"]) for r in runs[::6]],
                         [("half", "0"), ("half", "10"), ("float", "0"), ("float", "10")])
        for run in runs:
            argv = " ".join(run["argv"])
            for expected in ("-b 1024", "-e 4096", "-f 2", "-g 2", "-c 1", "-o sum"):
                self.assertIn(expected, argv)
            if run["with"]:
                self.assertEqual((run["preload"], run["debug"]), (self.library, "INFO"))
            else:
                self.assertIsNone(run["preload"])
                self.assertIsNone(run["debug"])

        rows = self.csv_rows()
        self.assertEqual(len(rows), 2 * 2 * 3)
        by_key = {(r["dtype"], r["mode"], int(r["size_bytes"])): r for r in rows}
        row = by_key[("float", "graph", 2048)]
        self.assertEqual((float(row["nccl_us"]), float(row["nccl_car_us"])), (40.0, 12.0))  # medians of 3
        self.assertAlmostEqual(float(row["speedup"]), 40 / 12, places=3)
        self.assertEqual((row["nccl_wrong"], row["nccl_car_wrong"], row["nccl_car_runs"]), ("0", "0", "3"))
        self.assertEqual(row["place"], "out-of-place")

        self.assertRegex(result.stdout, r"float\s+graph\s+2K\s+40\.00\s+12\.00\s+3\.33x\s+0\s+0")
        self.assertIn("[1/24] half eager NCCL only, repeat 1/3 ...", result.stderr)
        self.assertIn("[24/24] float graph with nccl-car, repeat 3/3 ...", result.stderr)
        self.assertIn("taken: 72 call(s) (1shot 0, 2shot 0, 1stage 60, 2stage 12)", result.stdout)
        self.assertIn("forwarded to NCCL: 24 call(s) (too-large 24)", result.stdout)
        root = ElementTree.parse(self.svg).getroot()
        self.assertEqual(len(root.findall(".//{http://www.w3.org/2000/svg}polyline")), 4 * 3)

    def test_in_place_graph_iters_and_extra_args(self):
        result = self.bench("--gpus", "1", "--dtypes", "bf16", "--modes", "graph", "--repeats", "1",
                            "--min-bytes", "2K", "--max-bytes", "2K", "--graph-iters", "25", "--in-place",
                            "--extra-args=-n 50 -w 5")
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual(len(runs), 2)
        self.assertEqual(runs[0]["argv"][-4:], ["-n", "50", "-w", "5"])
        self.assertEqual(runs[0]["G"], "25")
        row, = self.csv_rows()
        self.assertEqual((row["dtype"], row["place"], float(row["nccl_us"])), ("bfloat16", "in-place", 20000.0))

    def test_launcher_runs_one_gpu_per_rank(self):
        record = os.path.join(self.folder.name, "launcher-preload")
        launcher = write_script(os.path.join(self.folder.name, "fake-mpirun"), FAKE_LAUNCHER.format(record=record))
        result = self.bench("--launcher", f"{launcher} -np 2", "--dtypes", "float", "--modes", "eager",
                            "--repeats", "1", "--max-bytes", "1K")
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual([r["with"] for r in runs], [False, True])
        self.assertIn("-g 1", " ".join(runs[0]["argv"]))
        self.assertEqual(runs[1]["preload"], self.library)
        with open(record) as stream:
            self.assertEqual(stream.read().split(), ["none", "none"])  # the launcher itself never preloads

    def test_wrong_results_fail(self):
        result = self.bench("--gpus", "2", "--repeats", "1", "--dtypes", "half", "--modes", "eager",
                            "--max-bytes", "2K", config={"without": [10], "with": [5], "wrong_with": 4})
        self.assertEqual(result.returncode, 1)
        self.assertIn("wrong results", result.stdout)
        self.assertEqual([r["nccl_car_wrong"] for r in self.csv_rows()], ["4", "4"])

    def test_failed_run_fails_but_reports_the_rest(self):
        result = self.bench("--gpus", "2", "--repeats", "2", "--dtypes", "half", "--modes", "eager",
                            "--max-bytes", "1K", config={"without": [10, 12], "with": [5], "fail_with": True})
        self.assertEqual(result.returncode, 1)
        self.assertIn("FAILED: exited with 2", result.stderr)
        self.assertIn("stdout: node: Test NCCL failure", result.stderr)
        self.assertIn("2 run(s) failed", result.stdout)
        row, = self.csv_rows()
        self.assertEqual((float(row["nccl_us"]), row["nccl_car_us"]), (11.0, ""))

    def test_timeout(self):
        result = self.bench("--gpus", "1", "--repeats", "1", "--dtypes", "half", "--modes", "eager",
                            "--timeout", "1", config={"without": [1], "with": [1], "sleep": 30})
        self.assertEqual(result.returncode, 1)
        self.assertIn("timed out after 1 s", result.stderr)

    def test_library_printing_nothing_is_reported(self):
        # Under another name the fake does not see the library, and so logs nothing for it.
        other = os.path.join(self.folder.name, "libother.so")
        os.rename(self.library, other)
        result = self.bench("--gpus", "1", "--repeats", "1", "--dtypes", "half", "--modes", "eager",
                            "--max-bytes", "1K", "--lib", other, config={"without": [1, 1], "with": []})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual([r["preload"] for r in self.runs()], [None, other])
        self.assertIn("no NCCL-CAR line was seen", result.stdout)
        self.assertIn("warning: the library logged nothing in the runs with nccl-car", result.stdout)

    def test_missing_prerequisites(self):
        result = self.bench("--gpus", "1", perf_option=False, PATH=self.folder.name + "/empty")
        self.assertEqual(result.returncode, 3)
        self.assertIn("git clone https://github.com/NVIDIA/nccl-tests", result.stderr)
        self.assertIn("make -C nccl-tests MPI=0", result.stderr)
        result = self.bench("--gpus", "1", PATH=self.folder.name, perf_option=False)  # found on PATH
        self.assertEqual(result.returncode, 0, result.stderr)
        result = run_tool("bench", "--all-reduce-perf", self.perf, "--lib", "/nonexistent/libnccl-car.so")
        self.assertEqual(result.returncode, 3)
        self.assertIn("scripts/build.sh", result.stderr)
        result = self.bench("--launcher", "/nonexistent/mpirun -np 2")
        self.assertEqual(result.returncode, 3)
        self.assertIn("launcher not found", result.stderr)

    def test_no_gpu_needs_gpus_or_launcher(self):
        result = self.bench(CUDA_VISIBLE_DEVICES="")
        self.assertEqual(result.returncode, 3)
        self.assertIn("no GPU visible", result.stderr)

    def test_usage_errors(self):
        for options in (["--min-bytes", "2M", "--max-bytes", "1M"], ["--dtypes", "int8"], ["--dtypes", ""],
                        ["--modes", "lazy"], ["--repeats", "0"], ["--graph-iters", "-1"],
                        ["--min-bytes", "1X"], ["--max-bytes", "0"], ["--gpus", "2", "--launcher", "mpirun"],
                        ["--launcher", ""], ["--timeout", "0"], ["--extra-args", "'unclosed"]):
            with self.subTest(options=options):
                result = self.bench(*options)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn("error:", result.stderr)
        self.assertFalse(os.path.exists(self.log))  # nothing ran


if __name__ == "__main__":
    unittest.main()
