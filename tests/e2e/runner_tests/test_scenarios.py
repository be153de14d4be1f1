"""Whole scenarios on the CPU: a described machine, stand-in programs, a recording MPS
script. What each rank is started with, that MPS is up around the runs and down after them,
and what the runner decides and prints."""

import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from fake_machine import FakeMachine, fake_all_reduce_perf, fake_build, fake_mps
from runner_support import FAIL, PASS, SKIPPED
from e2e_runner import scenarios_nccl_tests, scenarios_python
from e2e_runner.all_scenarios import SCENARIOS
from e2e_runner.context import Context
from e2e_runner.main import run_scenario
from e2e_runner.tools_path import NCCL_CAR_TOOL


def env_of(log_text):
    line = next(line for line in log_text.splitlines() if line.startswith("env "))
    return dict(word.split("=", 1) for word in line.split()[1:])


def argv_of(log_text):
    return next(line for line in log_text.splitlines() if line.startswith("argv ")).split()[1:]


class ScenarioTest(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.folder = folder.name
        self.build = fake_build(self.folder)
        self.mps_script, self.mps_calls = fake_mps(self.folder)
        self.logs = os.path.join(self.folder, "logs")
        self.said = []

    def run_scenario(self, name, machine=None, **env):
        machine = machine or FakeMachine(env=dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS="32", **env))
        return run_scenario(SCENARIOS[name], machine, self.build, self.logs, say=self.said.append,
                            mps_script=self.mps_script)

    def rank_log(self, scenario, run, rank):
        with open(os.path.join(self.logs, scenario, f"{run}-r{rank}.log")) as log:
            return log.read()

    def mps_actions(self):
        with open(self.mps_calls) as calls:
            return [line.split()[0] for line in calls]

    def test_each_rank_gets_the_rig_environment_of_its_own(self):
        self.assertEqual(self.run_scenario("allreduce-2ranks"), PASS)
        for rank in (0, 1):
            env = env_of(self.rank_log("allreduce-2ranks", "allreduce-n2", rank))
            self.assertEqual(env["NCCL_HOSTID"], f"e2e-rank-{rank}")
            self.assertEqual(env["NCCL_CAR_MAX_BLOCKS"], "36")  # 132 / 2, at most a pull kernel's 36
            self.assertEqual(env["NCCL_CAR_DEBUG"], "INFO")
            self.assertEqual(env["LD_PRELOAD"], self.build.library)
            self.assertEqual(env["NCCL_SOCKET_IFNAME"], "lo")
            self.assertEqual(env["CUDA_DEVICE_MAX_CONNECTIONS"], "-")  # never under MPS
            self.assertTrue(env["LD_LIBRARY_PATH"].startswith("/opt/nccl/lib"))
            self.assertEqual(env["NCCL_CAR_TEST_FAULT"], "-")
        self.assertEqual(self.mps_actions(), ["start", "restart", "stop"])
        self.assertIn("allreduce-2ranks: 2 ranks: PASS (exit 0/0, 2/2 ranks eligible, 24 calls taken)", self.said)

    def test_eight_ranks_share_the_multiprocessors(self):
        self.assertEqual(self.run_scenario("allreduce-8ranks"), PASS)
        self.assertEqual(env_of(self.rank_log("allreduce-8ranks", "allreduce-n8", 7))["NCCL_CAR_MAX_BLOCKS"], "16")

    def test_a_failing_rank_fails_the_scenario_and_mps_still_stops(self):
        self.assertEqual(self.run_scenario("allreduce-4ranks", FAKE_EXIT_RANK_2="1"), FAIL)
        self.assertEqual(self.mps_actions()[-1], "stop")
        self.assertTrue(any("not met: every rank exits 0" in line for line in self.said))

    def test_the_fault_goes_to_rank_1_only(self):
        # The stand-in reports every rank eligible: the verdict must see no forwarding.
        self.assertEqual(self.run_scenario("setup-fault-ipc-open"), FAIL)
        self.assertEqual(env_of(self.rank_log("setup-fault-ipc-open", "fault-ipc-open", 0))["NCCL_CAR_TEST_FAULT"], "-")
        self.assertEqual(env_of(self.rank_log("setup-fault-ipc-open", "fault-ipc-open", 1))["NCCL_CAR_TEST_FAULT"],
                         "ipc-open")

    def test_a_recovery_scenario_the_nccl_cannot_run_is_skipped(self):
        status = self.run_scenario("recovery-shrink-abort", FAKE_EXIT_RANK_0="77",
                                   FAKE_OUTPUT="rank {0}: shrink-abort: SKIPPED (NCCL 22703 lacks the call)")
        self.assertEqual(status, SKIPPED)
        self.assertIn("recovery-shrink-abort: shrink-abort: SKIPPED (rank 0: shrink-abort: SKIPPED",
                      "\n".join(self.said))
        # recovery_e2e SCENARIO RANK ID_FILE
        self.assertEqual(argv_of(self.rank_log("recovery-shrink-abort", "shrink-abort", 1))[:2], ["shrink-abort", "1"])

    def test_the_launch_error_fault_goes_to_rank_0_of_ineligible_abort(self):
        self.run_scenario("recovery-ineligible-abort")
        self.assertEqual(env_of(self.rank_log("recovery-ineligible-abort", "ineligible-abort", 0))
                         ["NCCL_CAR_TEST_FAULT"], "launch-error")
        self.assertEqual(env_of(self.rank_log("recovery-ineligible-abort", "ineligible-abort", 1))
                         ["NCCL_CAR_TEST_FAULT"], "-")

    def test_nccl_tests_one_thread_per_gpu_on_two_gpus(self):
        perf = fake_all_reduce_perf(self.folder)
        machine = FakeMachine(gpus=2, env=dict(os.environ, ALL_REDUCE_PERF=perf))
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-threads", machine=machine), PASS)
        with open(os.path.join(self.logs, "multi-gpu-nccl-tests-threads", "nt-threads-t2-half-G10.log")) as log:
            self.assertIn("# argv -b 4 -e 64M -f 4 -c 1 -n 5 -w 2 -d half -t 2 -G 10", log.read())
        self.assertFalse(os.path.exists(self.mps_calls))  # one process per GPU: no MPS
        wrong = FakeMachine(gpus=2, env=dict(os.environ, ALL_REDUCE_PERF=perf, FAKE_WRONG="3"))
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-one-process", machine=wrong), FAIL)
        self.assertIn("one-process-g2-bfloat16: FAIL", "\n".join(self.said))

    def test_a_ctypes_client_per_rank_brought_in_by_audit(self):
        client = fake_build(os.path.join(self.folder, "client"), programs=("ctypes_allreduce",))
        with mock.patch.object(scenarios_python, "CTYPES_CLIENT", client.program("ctypes_allreduce")):
            status = self.run_scenario("ctypes-audit-name", FAKE_OUTPUT="rank {0}/{1}: PASS (fake)")
        self.assertEqual(status, PASS)
        for ranks in (2, 4):
            log = self.rank_log("ctypes-audit-name", f"ctypes-audit-name-n{ranks}", ranks - 1)
            env = env_of(log)
            self.assertEqual((env["LD_AUDIT"], env["LD_PRELOAD"]), (self.build.audit_module, "-"))
            self.assertEqual(env["NCCL_HOSTID"], f"ctypes-rank-{ranks - 1}")
            argv = argv_of(log)
            self.assertEqual(argv[:2] + argv[-1:], [str(ranks - 1), str(ranks), "libnccl.so.2"])
        self.assertEqual(self.mps_actions(), ["start", "restart", "stop"] * 2)

    def test_a_ctypes_client_reached_through_ld_preload_fails(self):
        # The stand-in client logs a set-up, as if LD_PRELOAD had reached a ctypes handle.
        client = fake_build(os.path.join(self.folder, "client"), programs=("ctypes_allreduce",))
        with mock.patch.object(scenarios_python, "CTYPES_CLIENT", client.program("ctypes_allreduce")):
            status = self.run_scenario("ctypes-preload", FAKE_OUTPUT="rank {0}/{1}: PASS (fake)")
        self.assertEqual(status, FAIL)
        self.assertIn("not met: no communicator set up", "\n".join(self.said))

    def test_missing_hardware_skips_before_anything_runs(self):
        for machine, reason in ((FakeMachine(gpus=0), "needs a GPU, none visible"),
                                (FakeMachine(commands=()), "no nvidia-cuda-mps-control on PATH"),
                                (FakeMachine(nccl_lib_dir=None), "no libnccl.so.2 found")):
            with self.subTest(reason=reason):
                self.said.clear()
                self.assertEqual(self.run_scenario("allreduce-2ranks", machine=machine), SKIPPED)
                self.assertIn(reason, self.said[-1])
        self.assertFalse(os.path.exists(self.mps_calls))
        self.assertFalse(os.path.exists(os.path.join(self.logs, "allreduce-2ranks")))

    def test_a_missing_library_fails(self):
        os.remove(self.build.library)
        self.assertEqual(self.run_scenario("allreduce-2ranks"), FAIL)
        self.assertIn("is not built", self.said[-1])


class CommandLineTest(unittest.TestCase):
    """What the scenarios that cannot run here as a whole hand to the programs."""

    def test_each_ctypes_mode_brings_the_library_in_its_own_way(self):
        with tempfile.TemporaryDirectory() as folder:
            build = fake_build(folder, programs=())
            context = Context(build, FakeMachine(env={"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/usr/lib"}),
                              os.path.join(folder, "logs"))
            client = ["python3", "ctypes_allreduce.py", "0", "2", "id"]

            def mode(name):
                return scenarios_python.ctypes_command(context, name, client)

            self.assertEqual(mode("audit-name"), (client + ["libnccl.so.2"], {"LD_AUDIT": build.audit_module}))
            self.assertEqual(mode("audit-path"), (client + ["/opt/nccl/lib/libnccl.so.2"],
                                                  {"LD_AUDIT": build.audit_module}))
            self.assertEqual(mode("dropin-name"), (client + ["libnccl.so.2"], {
                "LD_LIBRARY_PATH": f"{build.dropin_folder}:/opt/nccl/lib:/usr/lib"}))
            self.assertEqual(mode("tool-auto"), (["python3", NCCL_CAR_TOOL, "run", "--lib", build.library, "--"] +
                                                 client + ["libnccl.so.2"], {}))
            self.assertEqual(mode("preload"), (client + ["libnccl.so.2"], {"LD_PRELOAD": build.library}))

    def test_nccl_tests_ranks_get_their_host_id_from_the_mpi_rank(self):
        wrapper = scenarios_nccl_tests.RANK_HOST_ID
        shown = subprocess.run([sys.executable, wrapper, sys.executable, "-c",
                                "import os; print(os.environ['NCCL_HOSTID'])"],
                               env=dict(os.environ, OMPI_COMM_WORLD_RANK="3"), capture_output=True, text=True)
        self.assertEqual(shown.stdout, "nt-rank-3\n")

    def test_mpirun_hands_on_named_variables_and_given_values(self):
        self.assertEqual(scenarios_nccl_tests.mpirun_command(4, ("LD_LIBRARY_PATH",), NCCL_CAR_DEBUG="INFO"),
                         ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4", "-x", "LD_LIBRARY_PATH",
                          "-x", "NCCL_CAR_DEBUG=INFO"])


if __name__ == "__main__":
    unittest.main()
