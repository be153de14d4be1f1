"""Which scenarios there are, how they are picked and labelled, what the machine is taken
to offer, and the runner's exit codes (ctest reads 77 as skipped)."""

import contextlib
import io
import os
import stat
import tempfile
import unittest
from unittest import mock

from fake_machine import FakeMachine
from runner_support import FAIL, PASS, SKIPPED
from e2e_runner import environments, requirements
from e2e_runner.all_scenarios import SCENARIOS, select
from e2e_runner.build import Build
from e2e_runner.machine import Machine
from e2e_runner.main import exit_code, main


def run_main(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


class SelectionTest(unittest.TestCase):
    def test_patterns_and_labels(self):
        self.assertEqual([scenario.name for scenario in select(["recovery-destroy-*"])],
                         ["recovery-destroy-abort", "recovery-destroy-alone"])
        multi = select(label="multi-gpu")
        self.assertTrue(multi)
        self.assertTrue(all(scenario.name.startswith("multi-gpu-") for scenario in multi))
        self.assertEqual(select(["cycles", "abort-watchdog"]), [SCENARIOS["abort-watchdog"], SCENARIOS["cycles"]])
        self.assertEqual(len(select(label="e2e")), len(SCENARIOS))

    def test_every_op_scenarios_on_the_rig_and_on_two_gpus(self):
        self.assertEqual([scenario.name for scenario in select(["*all-ops*"])],
                         ["nccl-tests-all-ops-2ranks", "nccl-tests-all-ops-3ranks", "nccl-tests-all-ops-4ranks",
                          "multi-gpu-nccl-tests-all-ops", "nccl-tests-reduce-scatter-all-ops-2ranks",
                          "nccl-tests-reduce-scatter-all-ops-3ranks", "nccl-tests-reduce-scatter-all-ops-4ranks",
                          "multi-gpu-nccl-tests-reduce-scatter-all-ops", "torch-all-ops-2ranks", "torch-all-ops-3ranks",
                          "torch-all-ops-4ranks", "torch-all-ops-8ranks", "multi-gpu-torch-all-ops"])
        self.assertEqual(SCENARIOS["multi-gpu-nccl-tests-all-ops"].labels, ["e2e", "gpu", "multi-gpu"])
        self.assertEqual(SCENARIOS["nccl-tests-all-ops-3ranks"].labels, ["e2e", "gpu"])
        self.assertEqual(SCENARIOS["torch-all-ops-8ranks"].needs, ("gpu", "mps", "nccl", "torch", "torchrun"))

    def test_each_nccl_tests_program_has_the_same_scenarios(self):
        # all_gather_perf has no op: its every-type scenarios sweep types only.
        names = {prefix: sorted(name[len(prefix):] for name in SCENARIOS
                                if name.startswith(prefix) and not name.startswith(prefix + "all-gather-")
                                and not name.startswith(prefix + "reduce-scatter-"))
                 for prefix in ("nccl-tests-", "nccl-tests-all-gather-", "nccl-tests-reduce-scatter-",
                                "multi-gpu-nccl-tests-", "multi-gpu-nccl-tests-all-gather-",
                                "multi-gpu-nccl-tests-reduce-scatter-")}
        self.assertEqual(names["nccl-tests-"], ["2ranks", "4ranks", "8ranks", "all-ops-2ranks", "all-ops-3ranks",
                                                "all-ops-4ranks"])
        self.assertEqual(names["nccl-tests-reduce-scatter-"], names["nccl-tests-"])
        self.assertEqual(names["nccl-tests-all-gather-"], ["2ranks", "4ranks", "8ranks", "all-types-2ranks",
                                                           "all-types-3ranks", "all-types-4ranks"])
        self.assertEqual(names["multi-gpu-nccl-tests-"], ["all-ops", "mpi", "one-process", "threads"])
        self.assertEqual(names["multi-gpu-nccl-tests-reduce-scatter-"], names["multi-gpu-nccl-tests-"])
        self.assertEqual(names["multi-gpu-nccl-tests-all-gather-"], ["all-types", "mpi", "one-process", "threads"])
        self.assertEqual(SCENARIOS["nccl-tests-all-gather-8ranks"].needs,
                         ("gpu", "mps", "nccl", "mpirun", "all_gather_perf"))
        self.assertEqual(SCENARIOS["multi-gpu-nccl-tests-reduce-scatter-threads"].needs,
                         ("2 gpus", "nccl", "reduce_scatter_perf"))

    def test_every_scenario_needs_a_gpu_first(self):
        # On a machine without one (CI), every scenario is skipped for that reason alone.
        for scenario in SCENARIOS.values():
            with self.subTest(scenario=scenario.name):
                self.assertIn(scenario.needs[0], ("gpu", "2 gpus", "3 gpus"))
                self.assertIn("gpu", scenario.labels)
                reason = requirements.missing(scenario.needs, FakeMachine(gpus=0), Build("/nonexistent"))
                self.assertTrue(reason.startswith("needs"), reason)

    def test_labels_follow_the_gpus_needed(self):
        self.assertEqual(requirements.labels(("gpu", "mps")), ["e2e", "gpu"])
        self.assertEqual(requirements.labels(("2 gpus", "nccl")), ["e2e", "gpu", "multi-gpu"])
        self.assertEqual(requirements.labels(("3 gpus",)), ["e2e", "gpu", "multi-gpu"])

    def test_the_ctest_list_names_every_scenario_with_its_limit_and_labels(self):
        code, out, _ = run_main("--ctest-list")
        self.assertEqual(code, 0)
        rows = [line.split(" ") for line in out.splitlines()]
        self.assertEqual([row[0] for row in rows], list(SCENARIOS))
        for name, limit, labels in rows:
            self.assertEqual(int(limit), SCENARIOS[name].limit)
            self.assertEqual(labels.split(","), SCENARIOS[name].labels)

    def test_list_and_unknown_names(self):
        code, out, _ = run_main("--list", "torch-*")
        self.assertEqual(code, 0)
        self.assertEqual(len(out.splitlines()), 8)
        self.assertIn("torch-watchdog-abort", out)
        self.assertIn("torch-all-ops-3ranks", out)
        code, _, err = run_main("no-such-scenario")
        self.assertEqual(code, 2)
        self.assertIn("no scenario matches no-such-scenario", err)


class ExitCodeTest(unittest.TestCase):
    def test_skipped_only_is_77_a_failure_wins(self):
        self.assertEqual(exit_code([SKIPPED, SKIPPED]), 77)
        self.assertEqual(exit_code([SKIPPED, PASS]), 0)
        self.assertEqual(exit_code([PASS, FAIL, SKIPPED]), 1)

    def test_a_machine_without_gpus_skips_everything_with_77(self):
        # CUDA_VISIBLE_DEVICES empty: no GPU, whatever this machine has.
        with tempfile.TemporaryDirectory() as logs, mock.patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": ""}):
            code, out, _ = run_main("--build", logs, "--logs", logs, "allreduce-2ranks", "multi-gpu-torch")
        self.assertEqual(code, 77)
        self.assertIn("allreduce-2ranks: SKIPPED (needs a GPU, none visible)", out)
        self.assertIn("e2e: 0 passed, 0 failed, 2 skipped", out)


class MachineTest(unittest.TestCase):
    def test_visible_devices_decide_the_gpu_count(self):
        self.assertEqual(Machine(env={"CUDA_VISIBLE_DEVICES": "0,1", "PATH": ""}).gpus, 2)
        self.assertEqual(Machine(env={"CUDA_VISIBLE_DEVICES": "", "PATH": ""}).gpus, 0)
        self.assertEqual(Machine(env={"PATH": ""}).gpus, 0)  # no nvidia-smi

    def test_all_reduce_perf_from_the_variable_before_the_option(self):
        with tempfile.TemporaryDirectory() as folder:
            perf, other = (os.path.join(folder, name) for name in ("all_reduce_perf", "other"))
            for path in (perf, other):
                open(path, "w").close()
            os.chmod(perf, stat.S_IRWXU)

            def found(machine):
                return machine.nccl_tests_program("all_reduce_perf")

            self.assertEqual(found(Machine(env={}, all_reduce_perf=perf)), perf)
            self.assertEqual(found(Machine(env={"ALL_REDUCE_PERF": perf}, all_reduce_perf=other)), perf)
            self.assertIsNone(found(Machine(env={}, all_reduce_perf=other)))  # not executable
            self.assertIsNone(found(Machine(env={})))

    def test_the_other_programs_beside_all_reduce_perf_or_by_their_variables(self):
        with tempfile.TemporaryDirectory() as folder:
            build, elsewhere = (os.path.join(folder, name) for name in ("build", "elsewhere"))
            for place in (build, elsewhere):
                os.makedirs(place)
                for program in ("all_gather_perf", "reduce_scatter_perf"):
                    open(os.path.join(place, program), "w").close()
                    os.chmod(os.path.join(place, program), stat.S_IRWXU)
            beside = Machine(env={}, all_reduce_perf=os.path.join(build, "all_reduce_perf"))
            # all_reduce_perf itself need not be there for its folder to name the others.
            self.assertEqual(beside.nccl_tests_program("all_gather_perf"), os.path.join(build, "all_gather_perf"))
            named = Machine(env={"ALL_REDUCE_PERF": os.path.join(build, "all_reduce_perf"),
                                 "REDUCE_SCATTER_PERF": os.path.join(elsewhere, "reduce_scatter_perf")})
            self.assertEqual(named.nccl_tests_program("reduce_scatter_perf"),
                             os.path.join(elsewhere, "reduce_scatter_perf"))
            self.assertEqual(named.nccl_tests_program("all_gather_perf"), os.path.join(build, "all_gather_perf"))
            alone = Machine(env={"ALL_GATHER_PERF": os.path.join(elsewhere, "all_gather_perf")})
            self.assertEqual(alone.nccl_tests_program("all_gather_perf"), os.path.join(elsewhere, "all_gather_perf"))
            self.assertIsNone(alone.nccl_tests_program("reduce_scatter_perf"))  # nothing names it
            self.assertIsNone(alone.nccl_tests_path("reduce_scatter_perf"))

    def test_a_missing_program_names_where_it_was_looked_for(self):
        with tempfile.TemporaryDirectory() as folder:
            machine = Machine(env={"ALL_REDUCE_PERF": os.path.join(folder, "all_reduce_perf")})
            self.assertEqual(requirements.CHECKS["all_gather_perf"](machine, None),
                             f"no all_gather_perf: {folder}/all_gather_perf is not an executable (set ALL_GATHER_PERF "
                             "to an MPI build's all_gather_perf)")
            self.assertIn("no nccl-tests: set REDUCE_SCATTER_PERF to an MPI build's reduce_scatter_perf, or "
                          "ALL_REDUCE_PERF to the all_reduce_perf it was built beside",
                          requirements.CHECKS["reduce_scatter_perf"](Machine(env={}), None))
            self.assertIn("no nccl-tests: set ALL_REDUCE_PERF", requirements.CHECKS["all_reduce_perf"](Machine(env={}),
                                                                                                   None))

    def test_nccl_tests_options_from_their_usage(self):
        with tempfile.TemporaryDirectory() as folder:
            for program in ("all_reduce_perf", "all_gather_perf"):
                with open(os.path.join(folder, program), "w") as script:  # its usage, as nccl-tests 2.19.6 prints it
                    script.write(f"#!/bin/sh\necho \"USAGE: {program} [-u,--unalign <index of first element>] "
                                 "[-h,--help]\"\n" if program == "all_reduce_perf" else
                                 f"#!/bin/sh\necho \"USAGE: {program} [-h,--help]\"\n")
                os.chmod(os.path.join(folder, program), stat.S_IRWXU)
            machine = Machine(env={"ALL_REDUCE_PERF": os.path.join(folder, "all_reduce_perf"), "PATH": "/usr/bin:/bin"})
            self.assertTrue(machine.nccl_tests_has("all_reduce_perf", "unalign"))
            self.assertFalse(machine.nccl_tests_has("all_reduce_perf", "per_iter_timing"))
            self.assertFalse(machine.nccl_tests_has("all_reduce_perf", "unal"))  # whole names only
            self.assertFalse(machine.nccl_tests_has("all_gather_perf", "unalign"))  # each program asked itself
            self.assertFalse(Machine(env={"PATH": ""}).nccl_tests_has("all_reduce_perf", "unalign"))  # none at all

    def test_nccl_home_names_the_library_folder(self):
        with tempfile.TemporaryDirectory() as home:
            os.makedirs(os.path.join(home, "lib"))
            open(os.path.join(home, "lib", "libnccl.so.2"), "w").close()
            self.assertEqual(Machine(env={"NCCL_HOME": home, "PATH": ""}).nccl_lib_dir, os.path.join(home, "lib"))

    def test_the_multiprocessor_count_can_be_given(self):
        self.assertEqual(Machine(env={"RIG_SMS": "78", "PATH": ""}).multiprocessors, 78)


class EnvironmentsTest(unittest.TestCase):
    def test_rig_blocks(self):
        self.assertEqual([environments.rig_blocks(132, ranks) for ranks in (2, 3, 4, 8)], [36, 36, 33, 16])
        self.assertEqual(environments.rig_blocks(4, 8), 1)

    def test_the_rig_keeps_a_chosen_mps_pipe_and_turns_multicast_off(self):
        env = environments.rig({"CUDA_MPS_PIPE_DIRECTORY": "/run/mps", "LD_LIBRARY_PATH": "/usr/lib"}, "/nccl")
        self.assertEqual(env["CUDA_MPS_PIPE_DIRECTORY"], "/run/mps")
        self.assertEqual(env["CUDA_MPS_LOG_DIRECTORY"], environments.MPS_LOG_DIRECTORY)
        self.assertEqual(env["LD_LIBRARY_PATH"], "/nccl:/usr/lib")
        self.assertEqual(env["NCCL_NVLS_ENABLE"], "0")
        self.assertEqual(env["NCCL_CAR_PDL"], "0")  # rig_blocks has room for one grid per rank

    def test_with_library_leaves_out_unset_settings(self):
        env = environments.with_library({}, "/lib.so", NCCL_CAR_MAX_BLOCKS=4, NCCL_CAR_TEST_FAULT=None)
        self.assertEqual(env, {"LD_PRELOAD": "/lib.so", "NCCL_CAR_DEBUG": "INFO", "NCCL_CAR_MAX_BLOCKS": "4"})


if __name__ == "__main__":
    unittest.main()
