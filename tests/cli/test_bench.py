"""nccl-car bench end to end with its default driver, car_nccl_bench (a fake one)."""

import os
import re
import time
import unittest
import xml.etree.ElementTree as ElementTree

from bench_fixture import FIVE, BenchCase, flat_times

SVG = "{http://www.w3.org/2000/svg}"


class OrderAndEnvironment(BenchCase):
    def test_every_configuration_once_per_repeat_in_a_fixed_order(self):
        result = self.bench("--gpus", "2", "--dtypes", "half,fp32", "--max-bytes", "4K", "--repeats", "2",
                            LD_PRELOAD=self.library,              # left over: not in the baselines
                            NCCL_GRAPH_MIXING_SUPPORT="1",        # the configurations choose it
                            NCCL_CAR_MAX_BYTES="4096")            # the user's: reaches the car runs
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual([r["config"] for r in runs], FIVE * 4)
        self.assertEqual([r["dtype"] for r in runs[::5]], ["fp16", "fp16", "fp32", "fp32"])
        for run in runs:
            args, env = " ".join(run["args"]), run["env"]
            with self.subTest(config=run["config"]):
                self.assertIn("--gpus 2 --min-bytes 1024 --max-bytes 4096", args)
                self.assertEqual("--symmetric" in args, "R2" in run["config"])
                self.assertEqual(env["NCCL_GRAPH_MIXING_SUPPORT"], "0" if "gm0" in run["config"] else None)
                self.assertEqual(env["NCCL_CAR_MAX_BYTES"], "4096")
                if run["config"] == "car":
                    self.assertEqual((env["LD_PRELOAD"], env["NCCL_CAR_DEBUG"]), (self.library, "INFO"))
                else:
                    self.assertEqual((env["LD_PRELOAD"], env["NCCL_CAR_DEBUG"]), (None, None))
        self.assertIn("[1/20] half sum nccl, repeat 1/2 ...", result.stderr)
        self.assertIn("[20/20] float sum car, repeat 2/2 ...", result.stderr)

    def test_the_default_program_is_the_one_beside_the_library(self):
        result = self.bench("--gpus", "2", "--dtypes", "bf16", "--repeats", "1", "--max-bytes", "1K")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual({r["role"] for r in self.runs()}, {"car_nccl_bench"})
        self.assertIn("car_nccl_bench on 2 GPU(s)", result.stdout)

    def test_variants_run_after_car_in_the_fixed_order(self):
        result = self.bench("--gpus", "2", "--dtypes", "bf16", "--repeats", "1", "--max-bytes", "1K",
                            "--configs", "car-2stage,car-pdl0,car-1shot", NCCL_CAR_DEBUG="TRACE",
                            canned=flat_times(car=5, car_pdl0=20, car_1shot=4, car_2stage=8))
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual([r["config"] for r in runs], FIVE + ["car-pdl0", "car-1shot", "car-2stage"])
        by_config = {r["config"]: r["env"] for r in runs}
        self.assertEqual(by_config["car-pdl0"]["NCCL_CAR_PDL"], "0")
        self.assertEqual(by_config["car-1shot"]["NCCL_CAR_ALGO"], "1shot")
        self.assertEqual(by_config["car-2stage"]["NCCL_CAR_DEBUG"], "TRACE")  # at least INFO: TRACE stays
        self.assertIsNone(by_config["car"]["NCCL_CAR_ALGO"])
        # Each variant gets its time and its ratio to NCCL's best (10 us).
        self.assertRegex(result.stdout, r"1K\s+10\.00\s+10\.00\s+nccl\s+5\.00\s+0\.50\s+20\.00\s+2\.00\s+"
                                        r"4\.00\s+0\.40\s+8\.00\s+0\.80\s+0\s+0")
        row = self.csv_row("bfloat16", "eager", 1024)
        self.assertEqual((float(row["car-pdl0_us"]), row["car-1shot_runs"]), (20.0, "1"))
        self.assertIn("library lines in the car-pdl0 runs:", result.stdout)
        # Only car itself is in the verdict: the variants are experiments.
        self.assertIn("nccl-car is not slower than NCCL's best", result.stdout)


class BestOfNccl(BenchCase):
    def setUp(self):
        super().setUp()
        self.result = self.bench("--gpus", "2", "--dtypes", "fp16", "--max-bytes", "64K")

    def test_medians_best_configuration_and_ratio(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        expected_best = {1: "nccl-R2", 2: "nccl-R2", 4: "nccl-R2", 8: "nccl", 16: "nccl",
                         32: "nccl-gm0", 64: "nccl-gm0"}
        for kib, best in expected_best.items():
            with self.subTest(kib=kib):
                row = self.csv_row("half", "eager", kib * 1024)
                self.assertEqual(row["nccl_best_config"], best)   # on a tie, the first in the order
                best_us = min(20 + kib, 12 + 2 * kib, 40 + kib / 4, 50 + kib)
                self.assertAlmostEqual(float(row["nccl_best_us"]), best_us)
                self.assertAlmostEqual(float(row["car_us"]), 7 + kib)       # the outlier repeat left out
                self.assertAlmostEqual(float(row["car_over_nccl_best"]), (7 + kib) / best_us, places=5)
                self.assertAlmostEqual(float(row["car_over_nccl"]), (7 + kib) / (20 + kib), places=5)
                self.assertEqual(float(row["nccl-R2-gm0_us"]), 50 + kib)
                self.assertEqual(row["car_runs"], "3")
        graph = self.csv_row("half", "graph", 65536)
        self.assertEqual((float(graph["car_us"]), float(graph["nccl_best_us"])), (35.5, 28.0))

    def test_table(self):
        out = self.result.stdout
        self.assertIn("half sum eager: time per all-reduce (us)", out)
        self.assertRegex(out, r"\n\s+1K\s+21\.00\s+14\.00\s+nccl-R2\s+8\.00\s+0\.57\s+0\s+0\n")
        self.assertRegex(out, r"\n\s+64K\s+42\.00\s+28\.00\s+nccl-gm0\s+35\.50\s+1\.27\s+0\s+0\n")
        # Host time: NCCL alone against nccl-car, not against a best.
        self.assertIn("half sum host: time to issue one eager call (us)", out)
        self.assertRegex(out, r"\n\s+16K\s+3\.00\s+1\.50\s+0\.50\n")

    def test_says_where_nccl_car_is_slower(self):
        self.assertIn("nccl-car is SLOWER than NCCL's best at: half sum eager 64K (1.268x, best nccl-gm0); "
                      "half sum graph 64K (1.268x, best nccl-gm0)\n", self.result.stdout)

    def test_chart(self):
        root = ElementTree.parse(self.svg).getroot()
        # eager and graph: NCCL's best, nccl-car, ratio; host: NCCL, nccl-car.
        self.assertEqual(len(root.findall(f".//{SVG}polyline")), 2 * 3 + 2)
        texts = [t.text for t in root.iter(SVG + "text")]
        for label in ("half sum eager", "half sum graph", "half sum host", "host time to issue one eager call"):
            self.assertIn(label, texts)


class Verdicts(BenchCase):
    def test_never_slower(self):
        result = self.bench("--gpus", "2", "--dtypes", "bf16", "--repeats", "1", "--max-bytes", "4K",
                            canned=flat_times(car=10))   # a tie is not slower
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("nccl-car is not slower than NCCL's best at any of the 6 size(s) measured with both",
                      result.stdout)
        self.assertNotIn("SLOWER", result.stdout)

    def test_slower_than_the_best_but_not_than_nccl_alone(self):
        result = self.bench("--gpus", "2", "--dtypes", "bf16", "--repeats", "1", "--max-bytes", "1K",
                            "--modes", "graph", canned=flat_times(nccl=12, nccl_R2_gm0=8, car=9))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("nccl-car is SLOWER than NCCL's best at: bfloat16 sum graph 1K (1.125x, best nccl-R2-gm0)",
                      result.stdout)
        self.assertNotIn("bfloat16 sum eager", result.stdout)   # --modes graph: eager not reported
        self.assertAlmostEqual(float(self.csv_row("bfloat16", "graph", 1024)["car_over_nccl"]), 0.75)


class Failures(BenchCase):
    def test_wrong_result_fails_and_is_counted_at_its_size(self):
        canned = dict(flat_times(car=5), wrong={"car": 2048})
        result = self.bench("--gpus", "2", "--dtypes", "half", "--repeats", "2", "--max-bytes", "4K", canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertIn("FAILED: exited with 2; wrong result at 2048 bytes (3 element(s))", result.stderr)
        self.assertIn("2 run(s) failed:", result.stdout)
        self.assertIn("wrong results: see the #wrong columns", result.stdout)
        self.assertEqual(self.csv_row("half", "eager", 2048)["car_wrong"], "6")   # 3 in each of 2 runs
        self.assertEqual(self.csv_row("half", "eager", 2048)["car_us"], "")
        self.assertEqual(self.csv_row("half", "eager", 1024)["car_wrong"], "0")
        self.assertRegex(result.stdout, r"\n\s+2K\s+10\.00\s+10\.00\s+nccl\s+-\s+-\s+0\s+6\n")
        self.assertIn("no nccl-car time (its runs failed) at: half sum eager 2K, 4K; half sum graph 2K, 4K",
                      result.stdout)

    def test_failed_run_is_reported_and_the_others_still_count(self):
        canned = dict(flat_times(nccl_R2=4), exit={"nccl-R2": 3})
        result = self.quick(canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertIn("[2/5] half sum nccl-R2, repeat 1/1 ... FAILED: exited with 3", result.stderr)
        self.assertIn("command: ", result.stderr)
        self.assertIn("stdout: bytes,eager_us,graph_us,host_us", result.stderr)
        self.assertIn("half sum nccl-R2, repeat 1/1: exited with 3", result.stdout)
        # The run printed its rows before failing: they count.
        self.assertEqual(self.csv_row("half", "eager", 1024)["nccl_best_config"], "nccl-R2")

    def test_no_rows_is_a_failure(self):
        canned = dict(flat_times(), nothing=["car"])
        result = self.quick(canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertIn("[5/5] half sum car, repeat 1/1 ... FAILED: printed no result rows", result.stderr)
        self.assertIn("stdout: car_nccl_bench: needs 2 or more GPUs", result.stderr)

    def test_a_wrong_result_fails_whatever_the_exit_status(self):
        canned = dict(flat_times(), wrong={name: 1024 for name in FIVE}, exit={name: 0 for name in FIVE})
        result = self.quick(canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertIn("FAILED: wrong result at 1024 bytes", result.stderr)   # exit 0 does not hide it

    def test_timeout_kills_the_run_and_goes_on(self):
        canned = dict(flat_times(), sleep={"nccl-gm0": 60})
        started = time.monotonic()
        result = self.quick("--timeout", "1", canned=canned)
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(result.returncode, 1)
        self.assertIn("[3/5] half sum nccl-gm0, repeat 1/1 ... FAILED: timed out after 1 s", result.stderr)
        self.assertEqual([r["config"] for r in self.runs()], FIVE)
        self.assertEqual(self.csv_row("half", "eager", 1024)["nccl-gm0_runs"], "0")


class LibraryLog(BenchCase):
    def test_summary_of_the_car_runs(self):
        result = self.bench("--gpus", "2", "--dtypes", "half", "--repeats", "2", "--max-bytes", "1K",
                            canned=flat_times())
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("library lines in the car runs:", result.stdout)
        self.assertIn("taken: 8 call(s) (1shot 6, 2shot 0, 1stage 2, 2stage 0)", result.stdout)
        self.assertNotIn("warning", result.stdout)

    def test_car_runs_without_library_lines_are_flagged(self):
        result = self.quick(canned=dict(flat_times(), silent=["car"]))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("warning: the library logged nothing in the car runs", result.stdout)

    def test_baselines_with_library_lines_are_flagged(self):
        result = self.quick(canned=dict(flat_times(), leaky=["nccl-R2", "nccl-gm0"]))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("warning: the NCCL-only runs (nccl-R2, nccl-gm0) printed NCCL-CAR lines", result.stdout)


class Outputs(BenchCase):
    def test_csv_columns(self):
        result = self.bench("--gpus", "2", "--dtypes", "half", "--repeats", "1", "--max-bytes", "2K",
                            "--configs", "car-1stage", canned=flat_times())
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = self.csv_rows()
        self.assertEqual([(r["mode"], r["size_bytes"]) for r in rows],
                         [(m, s) for m in ("eager", "graph", "host") for s in ("1024", "2048")])
        names = FIVE + ["car-1stage"]
        self.assertEqual(list(rows[0]), ["dtype", "op", "mode", "place", "size_bytes"] + [f"{n}_us" for n in names]
                         + ["nccl_best_us", "nccl_best_config", "car_over_nccl_best", "car_over_nccl"]
                         + [f"{n}_wrong" for n in names] + [f"{n}_runs" for n in names])
        self.assertEqual(rows[0]["place"], "out-of-place")
        self.assertTrue(re.search(r"wrote .*out\.csv and .*out\.svg", result.stdout))
        self.assertTrue(os.path.getsize(self.svg) > 0)


if __name__ == "__main__":
    unittest.main()
