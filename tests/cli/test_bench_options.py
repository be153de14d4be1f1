"""nccl-car bench: which driver it takes, what it needs, and the options it refuses."""

import os
import unittest

from bench_fixture import BenchCase


class DriverChoice(BenchCase):
    def roles(self):
        return {run["role"] for run in self.runs()}

    def test_all_reduce_perf_on_path_when_our_program_is_missing(self):
        os.remove(self.program)
        result = self.quick(PATH=os.path.dirname(self.perf))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.roles(), {"all_reduce_perf"})

    def test_an_all_reduce_perf_option_chooses_all_reduce_perf(self):
        result = self.quick("--in-place", PATH=os.path.dirname(self.perf))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.roles(), {"all_reduce_perf"})

    def test_a_program_named_on_the_command_line(self):
        elsewhere = self.path("elsewhere")
        os.rename(self.program, elsewhere)
        result = self.quick("--car-nccl-bench", elsewhere)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.roles(), {"car_nccl_bench"})

    def test_nothing_to_run_with(self):
        os.remove(self.program)
        result = self.quick(PATH=self.path("empty"))
        self.assertEqual(result.returncode, 3)
        self.assertIn(f"no car_nccl_bench at {self.program}", result.stderr)
        self.assertIn("git clone https://github.com/NVIDIA/nccl-tests", result.stderr)
        self.assertIn("--car-nccl-bench PATH", result.stderr)

    def test_missing_prerequisites(self):
        cases = [
            (["--car-nccl-bench", self.path("nowhere")], {}, "--car-nccl-bench: no executable at"),
            (["--all-reduce-perf", self.path("nowhere")], {}, "--all-reduce-perf: no executable at"),
            (["--lib", self.path("no/libnccl-car.so"), "--car-nccl-bench", self.program], {},
             "scripts/build.sh"),
            ([], {"CUDA_VISIBLE_DEVICES": ""}, "car_nccl_bench needs 2 or more GPUs; 0 visible"),
            (["--all-reduce-perf", self.perf], {"CUDA_VISIBLE_DEVICES": ""}, "no GPU visible"),
            (["--all-reduce-perf", self.perf, "--launcher", self.path("no-mpirun") + " -np 2"], {},
             "launcher not found"),
        ]
        for options, env, message in cases:
            with self.subTest(options=options):
                result = self.quick(*options, gpus=None, **env)
                self.assertEqual(result.returncode, 3, result.stderr)
                self.assertIn(message, result.stderr)
        self.assertEqual(self.runs(), [])


class UsageErrors(BenchCase):
    def test_refused_before_anything_runs(self):
        for options in (["--min-bytes", "2M", "--max-bytes", "1M"], ["--dtypes", "int16"], ["--dtypes", ""], ["--dtypes", "all"],
                        ["--ops", "mulsum"], ["--ops", ""], ["--ops", "sum,"],
                        ["--modes", "lazy"], ["--modes", "host"], ["--repeats", "0"], ["--graph-iters", "-1"],
                        ["--min-bytes", "1X"], ["--max-bytes", "0"], ["--gpus", "2", "--launcher", "mpirun"],
                        ["--launcher", ""], ["--timeout", "0"], ["--extra-args", "'unclosed"],
                        ["--configs", "car-3shot"], ["--car-nccl-bench", "a", "--all-reduce-perf", "b"],
                        ["--car-nccl-bench", "a", "--launcher", "mpirun -np 2"],
                        ["--car-nccl-bench", "a", "--graph-iters", "5"], ["--gpus", "1"],
                        ["--save", "a", "--from", "b"]):
            with self.subTest(options=options):
                result = self.bench(*options)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn("error:", result.stderr)
        self.assertEqual(self.runs(), [])

    def test_naming_the_five_in_configs_changes_nothing(self):
        result = self.quick("--configs", "car,nccl-R2")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual([run["config"] for run in self.runs()], ["nccl", "nccl-R2", "nccl-gm0", "nccl-R2-gm0", "car"])


if __name__ == "__main__":
    unittest.main()
