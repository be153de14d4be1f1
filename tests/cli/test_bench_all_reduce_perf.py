"""nccl-car bench with nccl-tests' all_reduce_perf as the driver (a fake one)."""

import unittest

from bench_fixture import SIX, BenchCase, flat_times
from cli_support import write_script

# Stands in for mpirun: records its own LD_PRELOAD and NCCL_GRAPH_MIXING_SUPPORT, drops
# "-np N" and runs the rest as a rank on another host would: in an environment of its own.
FAKE_LAUNCHER = """\
#!/bin/sh
echo "${{LD_PRELOAD:-none}} ${{NCCL_GRAPH_MIXING_SUPPORT:-unset}}" >> {record}
shift 2
exec env NCCL_GRAPH_MIXING_SUPPORT=1 "$@"
"""


class AllReducePerfDriver(BenchCase):
    def test_one_run_per_form_with_nccl_tests_options(self):
        result = self.bench("--all-reduce-perf", self.perf, "--gpus", "2", "--dtypes", "bf16", "--max-bytes", "4K",
                            "--repeats", "2", "--graph-iters", "25", "--extra-args=-n 50 -w 5")
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual(sorted(r["config"] for r in runs), sorted(SIX * 4))
        self.assertEqual([r["mode"] for r in runs[::12]], ["25", "0"])   # graph, then eager; no probe
        for run in runs:
            args = run["args"]
            with self.subTest(config=run["config"]):
                self.assertEqual(args[-4:], ["-n", "50", "-w", "5"])
                joined = " ".join(args)
                for expected in ("-b 1024", "-e 4096", "-f 2", "-g 2", "-c 1", "-o sum", "-d bfloat16"):
                    self.assertIn(expected, joined)
                self.assertEqual("-R 2" in joined, "R2" in run["config"])
                self.assertEqual(run["env"]["NCCL_GRAPH_MIXING_SUPPORT"], "0" if "gm0" in run["config"] else None)
                self.assertEqual(run["env"]["NCCL_CAR_DEBUG"], "INFO")
        self.assertRegex(result.stderr, r"\[1/24\] bfloat16 sum chain-graph \S+, repeat 1/2 \.\.\.")
        self.assertIn("all_reduce_perf on 2 GPU(s)", result.stdout)
        row = self.csv_row("bfloat16", "chain-graph", 4096)
        # Graph times are half; car's median of 2 repeats is their mean, (11 + 104) / 4.
        self.assertEqual((row["nccl_best_config"], float(row["nccl_best_us"]), float(row["car_us"])),
                         ("nccl-R2", 10.0, 28.75))
        self.assertEqual(row["checked"], "once")   # nccl-tests checks one call after the timed ones
        self.assertNotIn("host", [r["mode"] for r in self.csv_rows()])   # nccl-tests does not measure it

    def test_in_place_columns(self):
        result = self.bench("--all-reduce-perf", self.perf, "--gpus", "1", "--dtypes", "float",
                            "--repeats", "1", "--max-bytes", "1K", "--in-place", canned=flat_times(car=5))
        self.assertEqual(result.returncode, 0, result.stderr)
        row = self.csv_row("float", "chain-eager", 1024, workload="in-place")
        self.assertEqual((float(row["car_us"]), float(row["nccl_us"])), (5000.0, 10000.0))

    def test_wrong_counts_come_from_the_table(self):
        canned = dict(flat_times(), wrong={"nccl-gm0": 2048, "car": 1024})
        result = self.bench("--all-reduce-perf", self.perf, "--gpus", "2", "--dtypes", "half",
                            "--repeats", "2", "--max-bytes", "2K", canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertIn("wrong results: see the #wrong columns", result.stdout)
        small, large = self.csv_row("half", "chain-eager", 1024), self.csv_row("half", "chain-eager", 2048)
        self.assertEqual((small["car_wrong"], small["nccl-gm0_wrong"]), ("6", "0"))
        self.assertEqual((large["car_wrong"], large["nccl-gm0_wrong"]), ("0", "6"))
        self.assertRegex(result.stdout, r"\n\s+2K\s+10\.00\s+10\.00\s+10\.00-10\.00\s+nccl\s+-\s+10\.00.*\s+6\s+once\n")

    def test_launcher_runs_one_gpu_per_rank_and_is_never_preloaded(self):
        record = self.path("launcher-record")
        launcher = write_script(self.path("fake-mpirun"), FAKE_LAUNCHER.format(record=record))
        result = self.bench("--all-reduce-perf", self.perf, "--launcher", f"{launcher} -np 2", "--dtypes", "float",
                            "--repeats", "1", "--max-bytes", "1K", LD_PRELOAD=self.library, NCCL_GRAPH_MIXING_SUPPORT="1")
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()[:6]
        by_config = {r["config"]: r for r in runs}
        self.assertEqual(sorted(by_config), sorted(SIX))
        self.assertIn("-g 1", " ".join(runs[0]["args"]))
        self.assertEqual(by_config["car"]["env"]["LD_PRELOAD"], self.library)
        self.assertEqual(by_config["nccl-gm0"]["env"]["NCCL_GRAPH_MIXING_SUPPORT"], "0")
        self.assertIsNone(by_config["nccl"]["env"]["NCCL_GRAPH_MIXING_SUPPORT"])   # env -u reaches the ranks
        with open(record) as stream:
            launcher_saw = stream.read().split("\n")[:6]
        self.assertEqual(launcher_saw, [f"none {'0' if 'gm0' in r['config'] else 'unset'}" for r in runs])

    def test_failed_bounds_check_fails_the_run(self):
        script = self.path("bounds-failing")
        write_script(script, f'#!/bin/sh\n"{self.perf}" "$@" | sed "s/0 OK/2 FAILED/"\n')
        result = self.bench("--all-reduce-perf", script, "--gpus", "1", "--dtypes", "half",
                            "--repeats", "1", "--max-bytes", "1K", canned=flat_times())
        self.assertEqual(result.returncode, 1)
        self.assertIn("FAILED: 2 out-of-bounds values", result.stderr)


if __name__ == "__main__":
    unittest.main()
