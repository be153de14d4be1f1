"""nccl-car bench --save DIR keeps every run's output; --from DIR prints the same table from
it without running anything."""

import json
import os
import shutil
import unittest

from bench_fixture import SIX, BenchCase, flat_times


class SaveAndFrom(BenchCase):
    def test_round_trip(self):
        saved = self.path("saved")
        first = self.bench("--gpus", "2", "--dtypes", "half,bf16", "--sizes", "1K,3000", "--repeats", "2",
                           "--workloads", "plain,in-place", "--configs", "car-2shot", "--save", saved,
                           canned={"times": {name: [[10 + i, 1], [20 + i, 2]] for i, name in enumerate(SIX + ["car-2shot"])}})
        self.assertEqual(first.returncode, 0, first.stderr)
        for dtype in ("half", "bfloat16"):
            for name in SIX + ["car-2shot"]:
                for repeat in (1, 2):
                    self.assertTrue(os.path.isfile(os.path.join(saved, f"{dtype}-sum", f"{name}.{repeat}.out")))
                    self.assertTrue(os.path.isfile(os.path.join(saved, f"{dtype}-sum", f"{name}.{repeat}.err")))
            for name in SIX[:4]:
                self.assertTrue(os.path.isfile(os.path.join(saved, f"{dtype}-sum", f"{name}.probe.out")))
        with open(os.path.join(saved, "half-sum", "car.1.err")) as stream:
            self.assertIn("NCCL-CAR INFO", stream.read())
        with open(os.path.join(saved, "half-sum", "car.1.out")) as stream:
            self.assertIn("model-graph,in-place,3000,", stream.read())   # the raw rows, every sample
        with open(os.path.join(saved, "bench.json")) as stream:
            manifest = json.load(stream)
        self.assertEqual((manifest["format"], manifest["seed"], manifest["sizes"]), (3, 7, [1024, 3000]))
        self.assertEqual(manifest["workloads"], ["plain", "in-place"])
        self.assertEqual(len(manifest["runs"]), 2 * (4 + 2 * 7))
        runs = {(run["config"], run["dtype"], run["repeat"], run["probe"]): run for run in manifest["runs"]}
        self.assertEqual(runs[("car", "half", 1, False)]["variables"]["LD_PRELOAD"], self.library)
        self.assertIn("--symmetric", runs[("nccl-R2", "half", 1, False)]["command"])
        self.assertEqual(runs[("nccl", "half", 0, True)]["variables"]["NCCL_DEBUG_SUBSYS"], "TUNING")

        # Elsewhere, later: the folder alone, nothing run, the same table and files.
        moved = self.path("copied")
        shutil.copytree(saved, moved)
        shutil.rmtree(saved)
        runs_before = len(self.runs(probes=True))
        csv_again = self.path("again.csv")
        second = self.bench("--from", moved, "--csv", csv_again, "--chart", self.chart, library=False, outputs=False)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertEqual(len(self.runs(probes=True)), runs_before)
        self.assertEqual(second.stdout.replace(csv_again, self.csv), first.stdout)
        self.assertEqual(self.csv_rows(csv_again), self.csv_rows())
        # A variant of ours is a kernel of the library: read without its query program, the
        # folder cannot say what car-2shot was.
        missing = self.path("no-query")
        third = self.bench("--from", moved, library=False, outputs=False, NCCL_CAR_QUERY=missing)
        self.assertEqual(third.returncode, 3, third.stderr)
        self.assertIn(f"the query program is not built (no {missing}", third.stderr)

    def test_failures_and_wrong_results_come_back_too(self):
        saved = self.path("saved")
        canned = dict(flat_times(), sleep={"nccl": 30}, wrong={"car": 2048})
        first = self.bench("--gpus", "2", "--dtypes", "half", "--sizes", "1K,2K", "--repeats", "1", "--no-probe",
                           "--workloads", "plain", "--timeout", "1", "--save", saved, canned=canned)
        self.assertEqual(first.returncode, 1)
        second = self.bench("--from", saved, library=False)
        self.assertEqual(second.returncode, 1)
        self.assertIn("half sum nccl, repeat 1/1: timed out after 1 s", second.stdout)
        self.assertIn("half sum car, repeat 1/1: exited with 2; wrong results at 2048 bytes", second.stdout)
        self.assertEqual(second.stdout, first.stdout)

    def test_a_missing_output_file_fails_that_run(self):
        saved = self.path("saved")
        self.quick("--save", saved)
        os.remove(os.path.join(saved, "half-sum", "nccl-R2.1.out"))
        result = self.bench("--from", saved, library=False)
        self.assertEqual(result.returncode, 1)
        self.assertIn("half sum nccl-R2, repeat 1/1: saved output unreadable (No such file or directory: "
                      "half-sum/nccl-R2.1.out); printed no result rows", result.stdout)

    def test_not_a_saved_folder(self):
        result = self.bench("--from", self.folder, library=False)
        self.assertEqual(result.returncode, 2)
        self.assertIn("bench.json", result.stderr)
        self.assertIn("not a folder written by nccl-car bench --save", result.stderr)
        for manifest in ({"format": 1, "driver": "car_nccl_bench"}, {"format": 1, "driver": "car_nccl_bench", "runs": []},
                         {"format": 2}, {"format": 3, "driver": "car_nccl_bench"}, "not an object",
                         {"format": 1, "driver": "car_nccl_bench", "configs": ["nccl", "car-9shot"], "dtypes": [],
                          "modes": [], "repeats": 1, "place": "out-of-place", "runs": []}):
            with self.subTest(manifest=manifest):
                with open(self.path("bench.json"), "w") as stream:
                    json.dump(manifest, stream)
                result = self.bench("--from", self.folder, library=False)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn("bench.json", result.stderr)
                self.assertNotIn("Traceback", result.stderr)

    def test_from_takes_the_options_from_the_folder(self):
        result = self.bench("--from", self.folder, "--dtypes", "half", "--repeats", "2")
        self.assertEqual(result.returncode, 2)
        self.assertIn("drop --lib, --dtypes, --repeats", result.stderr)
        result = self.bench("--from", self.folder, "--save", self.path("other"), library=False)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(self.runs(), [])


if __name__ == "__main__":
    unittest.main()
