"""nccl-car bench: which driver it takes, what it needs, and the options it refuses."""

import os
import unittest

from bench_fixture import SIX, BenchCase, flat_times


class DriverChoice(BenchCase):
    def roles(self):
        return {run["role"] for run in self.runs()}

    def either(self, *options, gpus="2", **env):
        """Options both drivers take: 1 KiB, one repeat, no probe."""
        return self.bench(*(["--gpus", gpus] if gpus else []), "--dtypes", "half", "--repeats", "1", "--max-bytes", "1K",
                          "--no-probe", *options, canned=flat_times(), **env)

    def test_all_reduce_perf_on_path_when_our_program_is_missing(self):
        os.remove(self.program)
        result = self.either(PATH=os.path.dirname(self.perf))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.roles(), {"all_reduce_perf"})

    def test_an_all_reduce_perf_option_chooses_all_reduce_perf(self):
        result = self.either("--in-place", PATH=os.path.dirname(self.perf))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.roles(), {"all_reduce_perf"})

    def test_a_program_named_on_the_command_line(self):
        elsewhere = self.path("elsewhere")
        os.rename(self.program, elsewhere)
        result = self.either("--car-nccl-bench", elsewhere)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.roles(), {"car_nccl_bench"})

    def test_nothing_to_run_with(self):
        os.remove(self.program)
        result = self.either(PATH=self.path("empty"))
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
            (["--one-gpu", "2"], {"CUDA_MPS_PIPE_DIRECTORY": self.path("nowhere")}, "needs MPS"),
            (["--all-reduce-perf", self.perf], {"CUDA_VISIBLE_DEVICES": ""}, "no GPU visible"),
            (["--all-reduce-perf", self.perf, "--launcher", self.path("no-mpirun") + " -np 2"], {},
             "launcher not found"),
        ]
        for options, env, message in cases:
            with self.subTest(options=options):
                result = self.either(*options, gpus=None, **env)
                self.assertEqual(result.returncode, 3, result.stderr)
                self.assertIn(message, result.stderr)
        self.assertEqual(self.runs(), [])

    def test_a_missing_library_is_said_before_the_program_beside_it(self):
        """Issue 47: --lib /nonexistent complained about car_nccl_bench, which is looked for beside it."""
        not_a_library = self.path("not-a-library.so")
        open(not_a_library, "w").close()
        for library, message in ((self.path("nowhere/libnccl-car.so"), "the nccl-car library is not at"),
                                 (not_a_library, "is not a shared library: it takes libnccl-car.so")):
            with self.subTest(library=library):
                result = self.either("--lib", library, gpus=None)
                self.assertEqual(result.returncode, 3, result.stderr)
                self.assertIn(f"{library} (from --lib)", result.stderr)
                self.assertIn(message, result.stderr)
                self.assertNotIn("car_nccl_bench", result.stderr)
        self.assertEqual(self.runs(), [])


class UsageErrors(BenchCase):
    def test_refused_before_anything_runs(self):
        for options in (["--min-bytes", "2M", "--max-bytes", "1M"], ["--dtypes", "int16"], ["--dtypes", ""], ["--dtypes", "all"],
                        ["--ops", "mulsum"], ["--ops", ""], ["--ops", "sum,"],
                        ["--modes", "lazy"], ["--modes", "host"], ["--modes", "eager"], ["--workloads", "odd"],
                        ["--sizes", "1K,x"], ["--sizes", "0"], ["--sizes", "1K", "--max-bytes", "2K"],
                        ["--repeats", "0"], ["--graph-iters", "-1"], ["--seed", "-1"], ["--collective", "all-to-all"],
                        ["--min-bytes", "1X"], ["--max-bytes", "0"], ["--gpus", "2", "--launcher", "mpirun"],
                        ["--one-gpu", "2", "--gpus", "2"], ["--one-gpu", "1"],
                        ["--launcher", ""], ["--timeout", "0"], ["--extra-args", "'unclosed"],
                        ["--configs", "car-3shot"], ["--car-nccl-bench", "a", "--all-reduce-perf", "b"],
                        ["--car-nccl-bench", "a", "--launcher", "mpirun -np 2"],
                        ["--car-nccl-bench", "a", "--graph-iters", "5"], ["--gpus", "1"],
                        ["--all-reduce-perf", "a", "--modes", "model"], ["--all-reduce-perf", "a", "--sizes", "1K"],
                        ["--in-place", "--workloads", "plain"], ["--all-reduce-perf", "a", "--one-gpu", "2"],
                        ["--all-reduce-perf", "a", "--collective", "all-gather"],
                        ["--collective", "all-gather", "--ops", "max"],
                        ["--save", "a", "--from", "b"]):
            with self.subTest(options=options):
                result = self.bench(*options)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn("error:", result.stderr)
        self.assertEqual(self.runs(), [])

    def test_naming_the_six_in_configs_changes_nothing(self):
        result = self.quick("--configs", "car,nccl-R2,car-pdl0")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(run["config"] for run in self.runs()), sorted(SIX))


if __name__ == "__main__":
    unittest.main()
