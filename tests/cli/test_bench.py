"""nccl-car bench end to end with its default driver, car_nccl_bench (a fake one)."""

import importlib.util
import os
import re
import time
import sys
import unittest

import cli_support
from bench_fixture import KIB_TO_64K, NCCL_CONFIGS, SIX, BenchCase, flat_times
from cli_support import write_script
from nccl_car_cli import library_query


class OrderAndEnvironment(BenchCase):
    def test_probes_first_then_every_configuration_once_per_repeat_in_a_shuffled_order(self):
        result = self.bench("--gpus", "2", "--dtypes", "half,fp32", "--sizes", "1K,4K", "--repeats", "3",
                            LD_PRELOAD=self.library,              # left over: not in the baselines
                            NCCL_GRAPH_MIXING_SUPPORT="1",        # the configurations choose it
                            NCCL_CAR_MAX_BYTES="4096")            # the user's: reaches the car runs
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs(probes=True)
        self.assertEqual(len(runs), 2 * (4 + 3 * 6))
        first = runs[:22]
        self.assertEqual([r["config"] for r in first[:4]], NCCL_CONFIGS)
        self.assertTrue(all(r["probe"] for r in first[:4]) and not any(r["probe"] for r in first[4:]))
        orders = [[r["config"] for r in first[4 + 6 * k:10 + 6 * k]] for k in range(3)]
        for order in orders:
            self.assertEqual(sorted(order), sorted(SIX))
        self.assertGreater(len({tuple(order) for order in orders + [SIX]}), 1)   # shuffled, not fixed
        self.assertEqual({r["dtype"] for r in runs[:22]}, {"fp16"})
        for run in runs:
            args, env = " ".join(run["args"]), run["env"]
            with self.subTest(config=run["config"], probe=run["probe"]):
                self.assertIn("--ranks 2 --collective all-reduce", args)
                self.assertIn("--sizes 1024,4096", args)
                self.assertEqual("--symmetric" in args, "R2" in run["config"])
                self.assertEqual(env["NCCL_GRAPH_MIXING_SUPPORT"], "0" if "gm0" in run["config"] else None)
                self.assertEqual(env["NCCL_CAR_DEBUG"], "INFO")   # every run: a leaked library would show
                self.assertEqual(env["NCCL_CAR_MAX_BYTES"], "4096")
                self.assertEqual(env["LD_PRELOAD"], self.library if run["config"].startswith("car") else None)
                self.assertEqual(env["NCCL_CAR_PDL"], "0" if run["config"] == "car-pdl0" else None)
                if run["probe"]:
                    self.assertIn("--probe", args)
                    self.assertEqual((env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]), ("INFO", "TUNING"))
                else:
                    self.assertIn("--modes model,isolated --workloads plain,in-place,two-streams,after-large", args)
                    self.assertEqual((env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]), (None, None))
        self.assertIn("[1/44] half sum nccl, probe ...", result.stderr)
        self.assertIn("in shuffled order, seed 7", result.stdout)

    def test_the_same_seed_gives_the_same_order(self):
        orders = []
        for _ in range(2):
            os.remove(self.log) if os.path.exists(self.log) else None
            self.quick("--repeats", "3")
            orders.append([r["config"] for r in self.runs()])
        self.assertEqual(orders[0], orders[1])

    def test_the_default_program_is_the_one_beside_the_library(self):
        result = self.quick()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual({r["role"] for r in self.runs()}, {"car_nccl_bench"})
        self.assertIn("car_nccl_bench on 2 GPU(s)", result.stdout)

    def test_variants_run_as_well_with_their_own_columns(self):
        result = self.quick("--configs", "car-2stage,car-1shot", NCCL_CAR_DEBUG="TRACE",
                            canned=flat_times(car=5, car_pdl0=20, car_1shot=4, car_2stage=8))
        self.assertEqual(result.returncode, 0, result.stderr)
        by_config = {r["config"]: r["env"] for r in self.runs()}
        self.assertEqual(sorted(by_config), sorted(SIX + ["car-1shot", "car-2stage"]))
        self.assertEqual(by_config["car-1shot"]["NCCL_CAR_ALGO"], "1shot")
        self.assertEqual(by_config["car-2stage"]["NCCL_CAR_DEBUG"], "TRACE")  # at least INFO: TRACE stays
        self.assertIsNone(by_config["car"]["NCCL_CAR_ALGO"])
        row = self.csv_row("half", "isolated-eager", 1024)
        self.assertEqual((float(row["car-pdl0_us"]), float(row["car-1shot_over_nccl_best"])), (20.0, 0.4))
        self.assertIn("library lines in the car-2stage runs:", result.stdout)
        self.assertIn("nccl-car is not slower than NCCL's best", result.stdout)   # car alone is in the verdict


class VariantsFromTheLibrary(BenchCase):
    """--configs offers ours forcing each all-reduce kernel the library has, by the names its
    query program gives (kernels/algorithms.h): bench types none of them."""

    FAKE_QUERY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_query.py")

    def setUp(self):
        super().setUp()
        self.kernels = library_query.kernels_by_collective(cli_support.query_program(self).policy({}))
        self.variants = [f"car-{kernel}" for kernel in self.kernels["all-reduce"]]

    def times_for(self, *names):
        return {"times": {name: [[10, 0]] for name in SIX + list(names)}}

    def test_every_all_reduce_kernel_in_the_library_s_order(self):
        result = self.quick("--configs", ",".join(reversed(self.variants)), canned=self.times_for(*self.variants))
        self.assertEqual(result.returncode, 0, result.stderr)
        by_config = {r["config"]: r["env"] for r in self.runs()}
        self.assertEqual(sorted(by_config), sorted(SIX + self.variants))
        for kernel in self.kernels["all-reduce"]:
            self.assertEqual(by_config[f"car-{kernel}"]["NCCL_CAR_ALGO"], kernel)
        columns = [name[:-len("_us")] for name in self.csv_rows()[0]
                   if name.endswith("_us") and not name.endswith(("_low_us", "_high_us")) and name != "nccl_best_us"]
        self.assertEqual(columns, SIX + self.variants)

    def test_a_kernel_of_another_collective_is_refused_with_the_library_s_names(self):
        for collective, kernels in self.kernels.items():
            for kernel in kernels if collective != "all-reduce" else ():
                with self.subTest(kernel=kernel):
                    result = self.quick("--configs", f"car-{kernel}")
                    self.assertEqual(result.returncode, 2, result.stderr)
                    self.assertIn(f"unknown configuration 'car-{kernel}': expected some of "
                                  f"{', '.join(SIX + self.variants)}", result.stderr)
        self.assertEqual(self.runs(), [])

    def test_a_kernel_the_library_gains_is_a_variant(self):
        # A library with one more all-reduce kernel: bench offers it with no change of its own.
        query = write_script(self.path("nccl_car_query"),
                             f'#!/bin/sh\nexec "{sys.executable}" "{self.FAKE_QUERY}" "$@"\n')
        result = self.quick("--configs", "car-newshot", canned=self.times_for("car-newshot"), NCCL_CAR_QUERY=query,
                            FAKE_QUERY_REAL=cli_support.QUERY_PROGRAM, FAKE_EXTRA_KERNEL="newshot")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual({r["env"]["NCCL_CAR_ALGO"] for r in self.runs() if r["config"] == "car-newshot"}, {"newshot"})
        self.assertEqual(self.quick("--configs", "car-newshot").returncode, 2)   # the library as it is

    def test_without_the_query_program_only_the_six(self):
        missing = os.path.join(self.folder, "no-query")
        result = self.quick("--configs", self.variants[0], NCCL_CAR_QUERY=missing)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertIn(f"the variants of ours are the library's kernels: the query program is not built (no {missing}",
                      result.stderr)
        self.assertEqual(self.runs(), [])
        self.assertEqual(self.quick("--configs", "car-pdl0", NCCL_CAR_QUERY=missing).returncode, 0)


class BestOfNccl(unittest.TestCase):
    """One bench of 22 runs, read by every test here."""

    @classmethod
    def setUpClass(cls):
        cls.case = BenchCase()
        cls.case.setUp()
        cls.result = cls.case.bench("--gpus", "2", "--dtypes", "fp16", "--sizes", KIB_TO_64K, "--repeats", "3",
                                    "--workloads", "plain")

    @classmethod
    def tearDownClass(cls):
        cls.case.tearDown()

    def csv_row(self, *args, **kwargs):
        return self.case.csv_row(*args, **kwargs)

    def test_medians_spread_best_configuration_and_ratios(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        expected_best = {1: "nccl-R2", 2: "nccl-R2", 4: "nccl-R2", 8: "nccl", 16: "nccl",
                         32: "nccl-gm0", 64: "nccl-gm0"}
        for kib, best in expected_best.items():
            for mode in ("model-eager", "isolated-eager"):
                with self.subTest(kib=kib, mode=mode):
                    row = self.csv_row("half", mode, kib * 1024)
                    self.assertEqual(row["nccl_best_config"], best)   # on a tie, the first in the order
                    best_us = min(20 + kib, 12 + 2 * kib, 40 + kib / 4, 50 + kib)
                    self.assertAlmostEqual(float(row["nccl_best_us"]), best_us)
                    self.assertAlmostEqual(float(row["car_us"]), 7 + kib)       # the outlier repeat left out
                    self.assertAlmostEqual(float(row["car_low_us"]), 7 + kib)
                    self.assertAlmostEqual(float(row["car_high_us"]), 100 + kib)  # but the spread shows it
                    self.assertAlmostEqual(float(row["car_over_nccl_best"]), (7 + kib) / best_us, places=5)
                    self.assertAlmostEqual(float(row["car-pdl0_over_nccl_best"]), (8 + kib) / best_us, places=5)
                    self.assertAlmostEqual(float(row["car_over_nccl"]), (7 + kib) / (20 + kib), places=5)
                    self.assertEqual((row["car_runs"], row["checked"], row["car_wrong"]), ("3", "every", "0"))
        graph = self.csv_row("half", "model-graph", 65536)
        self.assertEqual((float(graph["car_us"]), float(graph["nccl_best_us"])), (35.5, 28.0))

    def test_what_nccl_chose_comes_from_its_tuning_log(self):
        self.assertEqual(self.csv_row("half", "model-graph", 1024)["nccl_choice"], "RING/LL")   # nccl-R2 below 4K
        self.assertEqual(self.csv_row("half", "model-graph", 4096)["nccl_choice"], "symmetric AllReduce_AGxLL_R")
        self.assertEqual(self.csv_row("half", "model-graph", 16384)["nccl_choice"], "NVLS/Simple")  # nccl itself

    def test_table(self):
        out = self.result.stdout
        self.assertIn("half sum, plain (out of place, one stream), model-graph: model-like step from a CUDA graph",
                      out)
        self.assertRegex(out, r"size\s+NCCL\s+NCCL best\s+spread\s+best is\s+NCCL chose\s+nccl-car\s+spread\s+/best"
                              r"\s+car-pdl0\s+spread\s+/best\s+#wrong\s+checked\n")
        self.assertRegex(out, r"\n\s+1K\s+21\.00\s+14\.00\s+14\.00-14\.00\s+nccl-R2\s+RING/LL\s+8\.00\s+8\.00-101\.00"
                              r"\s+0\.57\s+9\.00\s+9\.00-9\.00\s+0\.64\s+0\s+every\n")
        # Host time against NCCL's best host time (nccl-R2's 2.0), not NCCL alone.
        self.assertIn("half sum, plain (out of place, one stream), host: host time to issue one eager call", out)
        self.assertRegex(out, r"\n\s+16K\s+3\.00\s+2\.00\s+2\.00-2\.00\s+nccl-R2\s+symmetric AllReduce_AGxLL_R\s+1\.50\s+1\.50-1\.50"
                              r"\s+0\.75\s+2\.00\s+2\.00-2\.00\s+1\.00\s+0\s+every\n")
        self.assertIn("note: 3 run(s) per configuration; a spread needs 5 or more", out)

    def test_says_where_nccl_car_is_slower(self):
        self.assertIn("nccl-car is SLOWER than NCCL's best at: half sum plain model-graph 64K (1.268x, best nccl-gm0); "
                      "half sum plain model-eager 64K (1.268x, best nccl-gm0); ", self.result.stdout)


class Checks(BenchCase):
    def test_a_row_not_checked_says_so(self):
        canned = dict(flat_times(), unchecked={"car": ["model-graph"]})
        result = self.quick("--modes", "model", canned=canned)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.csv_row("half", "model-graph", 1024)["checked"], "no")
        self.assertEqual(self.csv_row("half", "model-eager", 1024)["checked"], "every")
        self.assertRegex(result.stdout, r"model-graph: .*\n.*\n-+\n\s+1K .*\s+0\s+NO\n")
        self.assertIn("NOT CHECKED (their outputs were never compared): half sum plain model-graph 1K", result.stdout)

    def test_wrong_result_fails_and_is_counted_at_its_size(self):
        canned = dict(flat_times(car=5), wrong={"car": 2048})
        result = self.bench("--gpus", "2", "--dtypes", "half", "--repeats", "2", "--sizes", "1K,2K",
                            "--workloads", "plain", "--modes", "isolated", canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertIn("FAILED: exited with 2; wrong results at 2048 bytes probe plain (3 element(s)), "
                      "2048 bytes isolated-graph plain (3 element(s))", result.stderr)
        self.assertIn("2 run(s) failed:", result.stdout)
        self.assertIn("wrong results: see the #wrong columns", result.stdout)
        self.assertEqual(self.csv_row("half", "isolated-eager", 2048)["car_wrong"], "6")   # 3 in each of 2 runs
        self.assertEqual(self.csv_row("half", "isolated-eager", 1024)["car_wrong"], "0")


class Failures(BenchCase):
    def test_failed_run_is_reported_and_the_others_still_count(self):
        canned = dict(flat_times(nccl_R2=4), exit={"nccl-R2": 3})
        result = self.quick(canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"\[\d/6\] half sum nccl-R2, repeat 1/1 \.\.\. FAILED: exited with 3")
        self.assertIn("command: ", result.stderr)
        self.assertIn("stdout: mode,workload,bytes,us,checked,wrong,samples_us", result.stderr)
        self.assertIn("half sum nccl-R2, repeat 1/1: exited with 3", result.stdout)
        # The run printed its rows before failing: they count.
        self.assertEqual(self.csv_row("half", "isolated-eager", 1024)["nccl_best_config"], "nccl-R2")

    def test_no_rows_is_a_failure(self):
        result = self.quick(canned=dict(flat_times(), nothing=["car"]))
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"half sum car, repeat 1/1 \.\.\. FAILED: printed no result rows")
        self.assertIn("stdout: car_nccl_bench: needs 2 or more GPUs", result.stderr)
        self.assertIn("no nccl-car time (its runs failed) at: half sum plain isolated-graph 1K", result.stdout)

    def test_a_wrong_result_fails_whatever_the_exit_status(self):
        canned = dict(flat_times(), wrong={name: 1024 for name in SIX}, exit={name: 0 for name in SIX})
        result = self.quick(canned=canned)
        self.assertEqual(result.returncode, 1)
        self.assertIn("FAILED: wrong results at 1024 bytes", result.stderr)   # exit 0 does not hide it

    def test_timeout_kills_the_run_and_goes_on(self):
        canned = dict(flat_times(), sleep={"nccl-gm0": 60})
        started = time.monotonic()
        result = self.quick("--timeout", "1", canned=canned)
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"half sum nccl-gm0, repeat 1/1 \.\.\. FAILED: timed out after 1 s")
        self.assertEqual(sorted(r["config"] for r in self.runs()), sorted(SIX))
        self.assertEqual(self.csv_row("half", "isolated-eager", 1024)["nccl-gm0_runs"], "0")


class LibraryLog(BenchCase):
    def test_summary_of_the_car_runs(self):
        result = self.quick("--repeats", "2")
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


class OneGpu(BenchCase):
    def test_ranks_on_one_gpu_need_mps(self):
        result = self.quick("--one-gpu", "4", gpus=None, CUDA_MPS_PIPE_DIRECTORY=self.path("no-mps"))
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertIn("needs MPS", result.stderr)
        self.assertIn("tests/e2e/mps.sh start", result.stderr)
        self.assertEqual(self.runs(), [])

    def test_ranks_on_one_gpu(self):
        pipe = self.path("mps")
        os.makedirs(pipe)
        open(os.path.join(pipe, "control"), "w").close()
        result = self.quick("--one-gpu", "4", gpus=None, CUDA_MPS_PIPE_DIRECTORY=pipe)
        self.assertEqual(result.returncode, 0, result.stderr)
        for run in self.runs():
            self.assertIn("--ranks 4 --one-gpu", " ".join(run["args"]))
        self.assertIn("car_nccl_bench on 4 ranks on one GPU (processes under MPS)", result.stdout)


class Outputs(BenchCase):
    def test_csv_columns(self):
        result = self.quick("--sizes", "1K,2K", "--modes", "model", "--configs", "car-1stage")
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = self.csv_rows()
        self.assertEqual([(r["mode"], r["size_bytes"]) for r in rows],
                         [(m, s) for m in ("model-graph", "model-eager") for s in ("1024", "2048")])
        names = SIX + ["car-1stage"]
        self.assertEqual(list(rows[0]), ["dtype", "op", "workload", "mode", "size_bytes"]
                         + [f"{n}_{what}" for n in names for what in ("us", "low_us", "high_us", "runs", "wrong")]
                         + ["nccl_best_us", "nccl_best_config", "nccl_choice"]
                         + [f"{n}_over_nccl_best" for n in ("car", "car-pdl0", "car-1stage")]
                         + ["car_over_nccl", "checked"])
        self.assertEqual(rows[0]["workload"], "plain")

    def test_without_matplotlib_the_chart_is_left_out_and_says_so(self):
        result = self.quick()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(re.search(r"wrote .*out\.csv; chart not drawn: matplotlib is not installed "
                                  r"\(pip install matplotlib draws it\)", result.stdout), result.stdout)
        self.assertFalse(os.path.exists(self.chart))

    @unittest.skipUnless(importlib.util.find_spec("matplotlib"), "matplotlib is not installed here")
    def test_with_matplotlib_the_chart_is_drawn(self):
        result = self.bench("--gpus", "2", "--dtypes", "half", "--repeats", "1", "--sizes", "1K,4K", matplotlib=True,
                            canned=flat_times())
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"and {self.chart}", result.stdout)
        with open(self.chart) as stream:
            self.assertIn("<svg", stream.read())


if __name__ == "__main__":
    unittest.main()


class AnotherNccl(BenchCase):
    def test_every_run_loads_the_nccl_named_with_the_library_forwarding_to_it(self):
        folder = os.path.join(self.folder, "nccl-2.32.3", "lib")
        os.makedirs(folder)
        nccl = os.path.join(folder, "libnccl.so.2")
        open(nccl, "w").close()
        result = self.bench("--gpus", "2", "--sizes", "1K", "--repeats", "1", "--no-probe", "--nccl", nccl,
                            "--save", self.path("saved"), LD_LIBRARY_PATH="/opt/other")
        self.assertEqual(result.returncode, 0, result.stderr)
        runs = self.runs()
        self.assertEqual(sorted(run["config"] for run in runs), sorted(SIX))
        for run in runs:
            with self.subTest(config=run["config"]):
                self.assertEqual(run["env"]["LD_LIBRARY_PATH"], f"{folder}:/opt/other")
                self.assertEqual(run["env"]["NCCL_CAR_NCCL_LIB"], nccl)
        with open(self.path(os.path.join("saved", "bench.json"))) as stream:
            self.assertIn(f'"nccl": "{nccl}"', stream.read())

    def test_a_nccl_that_is_no_libnccl_so_2_is_refused_before_anything_runs(self):
        result = self.bench("--gpus", "2", "--sizes", "1K", "--nccl", self.library)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertIn("not a file named libnccl.so.2", result.stderr)
        self.assertFalse(os.path.exists(self.log))
