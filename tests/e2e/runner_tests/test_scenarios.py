"""Whole scenarios on the CPU: a described machine, stand-in programs, a recording MPS
script. What each rank is started with, that MPS is up around the runs and down after them,
and what the runner decides and prints."""

import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import cli_support
import runner_support
from fake_machine import FakeMachine, fake_nccl_tests, fake_build, fake_launchers, fake_mps, fake_torch_ops
from runner_support import FAIL, PASS, SKIPPED
from e2e_runner import scenarios_nccl_tests, scenarios_python, ways_in
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
        # The stand-in build's query program is this build's: the verdicts read the library's
        # kernel names from it.
        cli_support.require_built(self, cli_support.QUERY_PROGRAM)
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
        self.assertIn("allreduce-2ranks: 2 ranks: PASS (exit 0/0, 2/2 ranks eligible, 24 of 24 calls taken, 4 forwarded "
                      "(too-large=4))", self.said)

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

    def test_setup_opposite_order_gives_each_rank_room_for_two_grids(self):
        # The stand-in prints allreduce_e2e's lines, so the verdicts fail: what each rank was
        # started with is what is checked here.
        self.assertEqual(self.run_scenario("setup-opposite-order"), FAIL)
        for ranks, blocks in ((2, "33"), (4, "16")):  # 132 / (2 x ranks), at most 36
            for rank in range(ranks):
                log = self.rank_log("setup-opposite-order", f"opposite-order-n{ranks}", rank)
                self.assertEqual(argv_of(log)[:3], ["opposite-order", str(rank), str(ranks)])
                env = env_of(log)
                self.assertEqual((env["NCCL_HOSTID"], env["NCCL_CAR_MAX_BLOCKS"], env["LD_PRELOAD"]),
                                 (f"opposite-order-n{ranks}-rank-{rank}", blocks, self.build.library))
        self.assertEqual(self.mps_actions(), ["start", "restart", "restart", "stop"])

    def test_setup_dead_peer_runs_nccl_alone_then_the_library_under_its_bound(self):
        self.assertEqual(self.run_scenario("setup-dead-peer"), FAIL)  # the stand-in's lines, as above
        for rank in range(3):
            reference = self.rank_log("setup-dead-peer", "dead-peer-nccl", rank)
            self.assertEqual(argv_of(reference)[:3], ["dead-peer", str(rank), "3"])
            env = env_of(reference)
            self.assertEqual((env["NCCL_HOSTID"], env["LD_PRELOAD"], env["NCCL_CAR_SETUP_TIMEOUT_MS"]),
                             (f"dead-peer-nccl-rank-{rank}", "-", "-"))
            first_call = self.rank_log("setup-dead-peer", "dead-peer-nccl-first-call", rank)
            self.assertEqual(argv_of(first_call)[:3] + argv_of(first_call)[4:], ["dead-peer", str(rank), "3",
                                                                                "first-call"])
            self.assertEqual(env_of(first_call)["LD_PRELOAD"], "-")
            for run, connect in (("dead-peer", "-"), ("dead-peer-eager-connect", "0")):
                env = env_of(self.rank_log("setup-dead-peer", run, rank))
                self.assertEqual((env["NCCL_HOSTID"], env["LD_PRELOAD"], env["NCCL_CAR_SETUP_TIMEOUT_MS"],
                                  env["NCCL_RUNTIME_CONNECT"]), (f"{run}-rank-{rank}", self.build.library, "5000",
                                                                 connect))
        self.assertEqual(self.mps_actions(), ["start", "restart", "restart", "restart", "restart", "stop"])
        said = "\n".join(self.said)
        self.assertIn("setup-dead-peer: 3 processes on one GPU, NCCL's defaults: FAIL (", said)
        self.assertIn("setup-dead-peer: 3 processes on one GPU, NCCL_RUNTIME_CONNECT=0: FAIL (", said)

    def test_nccl_tests_one_thread_per_gpu_on_two_gpus(self):
        perf = fake_nccl_tests(self.folder)
        machine = FakeMachine(gpus=2, env=dict(os.environ, ALL_REDUCE_PERF=perf))
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-threads", machine=machine), PASS)
        with open(os.path.join(self.logs, "multi-gpu-nccl-tests-threads", "nt-threads-t2-half-G10.log")) as log:
            self.assertIn("# argv -b 4 -e 64M -f 4 -c 1 -n 5 -w 2 -d half -t 2 -G 10", log.read())
        self.assertFalse(os.path.exists(self.mps_calls))  # one process per GPU: no MPS
        wrong = FakeMachine(gpus=2, env=dict(os.environ, ALL_REDUCE_PERF=perf, FAKE_WRONG="3"))
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-one-process", machine=wrong), FAIL)
        self.assertIn("one-process-g2-bfloat16: FAIL", "\n".join(self.said))

    def launching_machine(self, gpus, **env):
        """A machine whose mpirun and torchrun are the stand-ins, with the stand-in nccl-tests."""
        path = f"{fake_launchers(self.folder)}:{os.environ['PATH']}"
        return FakeMachine(gpus=gpus, env=dict(os.environ, PATH=path, ALL_REDUCE_PERF=fake_nccl_tests(self.folder),
                                               **env))

    def scenario_log(self, scenario, run):
        with open(os.path.join(self.logs, scenario, run + ".log")) as log:
            return log.read()

    def test_nccl_tests_every_op_on_the_rig(self):
        machine = self.launching_machine(1, FAKE_REASONS="too-large=12")
        self.assertEqual(self.run_scenario("nccl-tests-all-ops-3ranks", machine=machine), PASS)
        said = "\n".join(self.said)
        for sweep in ("odd", "small", "unaligned"):
            for op in scenarios_nccl_tests.BUILT_IN_OPS:
                self.assertIn(f"nccl-tests-all-ops-3ranks: 3 ranks, {sweep} sizes, {op}: PASS", said)
        log = self.scenario_log("nccl-tests-all-ops-3ranks", "nt-ops-n3-odd-avg")
        self.assertIn("# argv -b 4 -e 9437184 -i 999997 -d all -o avg -n 1 -w 0 -c 1\n", log)
        self.assertIn("           0             0     int64     avg", log)  # a count-0 row: empty allowed
        self.assertIn("# argv -b 24 -e 4800 -i 48 -d all -o sum -n 1 -w 0 -c 1\n",
                      self.scenario_log("nccl-tests-all-ops-3ranks", "nt-ops-n3-small-sum"))
        self.assertIn("# argv -b 4 -e 1048576 -i 16411 -u 1 -d all -o max -n 1 -w 0 -c 1\n",
                      self.scenario_log("nccl-tests-all-ops-3ranks", "nt-ops-n3-unaligned-max"))
        library = self.build.library
        for rank in range(3):  # each rank on GPU 0 with a host id of its own, through rank_host_id.py
            self.assertIn(f"# rank {rank} env NCCL_HOSTID=nt-rank-{rank} NCCL_TESTS_DEVICE=0 NCCL_CAR_MAX_BLOCKS=36 "
                          f"NCCL_CAR_DEBUG=INFO LD_PRELOAD={library}\n", log)
        self.assertIn("3 ranks, odd sizes, sum: PASS (exit 0, 120 rows (12 types: also f8e4m3 f8e5m2; sum), #wrong 0, "
                      "3 ranks eligible, 72 calls taken, 36 forwarded (too-large=36))", said)
        self.assertEqual(self.mps_actions(), ["start"] + ["restart"] * 15 + ["stop"])

    def test_an_all_reduce_perf_without_unalign_runs_the_other_sweeps(self):
        # An older nccl-tests would print its usage for -u and exit 0 without a table.
        machine = self.launching_machine(1, FAKE_UNALIGN="0")
        self.assertEqual(self.run_scenario("nccl-tests-all-ops-2ranks", machine=machine), PASS)
        self.assertIn("  all_reduce_perf has no -u (--unalign): the unaligned sweep is left out", self.said)
        self.assertFalse(any(", unaligned sizes, " in line for line in self.said))
        self.assertEqual(self.mps_actions(), ["start"] + ["restart"] * 10 + ["stop"])

    def test_nccl_tests_every_op_fails_on_any_other_forward(self):
        machine = self.launching_machine(1, FAKE_REASONS="too-large=12 symmetric-window=2")
        self.assertEqual(self.run_scenario("nccl-tests-all-ops-2ranks", machine=machine), FAIL)
        said = "\n".join(self.said)
        self.assertIn("not met: no call forwarded but too-large or empty", said)
        self.assertIn("forwarded for other reasons: symmetric-window=4", said)
        # The small sizes hold a whole element of every type: empty is not allowed there.
        self.said.clear()
        machine = self.launching_machine(1, FAKE_REASONS="empty=1")
        self.assertEqual(self.run_scenario("nccl-tests-all-ops-2ranks", machine=machine), FAIL)
        said = "\n".join(self.said)
        self.assertIn("2 ranks, odd sizes, prod: PASS", said)
        self.assertIn("2 ranks, small sizes, prod: FAIL", said)

    def test_nccl_tests_every_op_on_two_gpus(self):
        machine = self.launching_machine(4)
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-all-ops", machine=machine), PASS)
        log = self.scenario_log("multi-gpu-nccl-tests-all-ops", "nt-ops-gpus2-small-min")
        self.assertIn("# mpirun --allow-run-as-root --oversubscribe -np 2 -x LD_PRELOAD -x LD_LIBRARY_PATH "
                      "-x NCCL_NVLS_ENABLE -x NCCL_CAR_DEBUG ", log)
        self.assertIn("# argv -b 24 -e 4800 -i 48 -d all -o min -n 1 -w 0 -c 1 -g 1\n", log)
        self.assertIn(f"# rank 1 env NCCL_HOSTID=- NCCL_TESTS_DEVICE=- NCCL_CAR_MAX_BLOCKS=- NCCL_CAR_DEBUG=INFO "
                      f"LD_PRELOAD={self.build.library}\n", log)
        self.assertEqual(sum("2 GPUs, " in line and ": PASS (" in line for line in self.said), 15)
        self.assertFalse(os.path.exists(self.mps_calls))
        wrong = self.launching_machine(2, FAKE_WRONG="1e+06")
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-all-ops", machine=wrong), FAIL)
        # 1e+06 out of place on each of the 120 rows (12 types x 10 sizes) of the first run.
        self.assertIn("2 GPUs, odd sizes, sum: FAIL (exit 0, 120 rows (12 types: also f8e4m3 f8e5m2; sum), "
                      "#wrong 120000000,", "\n".join(self.said))

    def test_all_gather_perf_on_the_rig(self):
        self.assertEqual(self.run_scenario("nccl-tests-all-gather-4ranks", machine=self.launching_machine(1)), PASS)
        log = self.scenario_log("nccl-tests-all-gather-4ranks", "nt-n4-bfloat16-G10")
        self.assertIn("# Collective test starting: all_gather_perf\n", log)
        self.assertIn("# argv -b 16 -e 16M -f 4 -d bfloat16 -c 1 -n 5 -w 2 -G 10\n", log)
        self.assertIn("           0             0  bfloat16    none", log)  # 16 B: no 16 bytes a rank
        self.assertIn("       65536          8192  bfloat16    none", log)  # the whole message, each rank's part
        for rank in range(4):
            self.assertIn(f"# rank {rank} env NCCL_HOSTID=nt-rank-{rank} NCCL_TESTS_DEVICE=0 NCCL_CAR_MAX_BLOCKS=33 ",
                          log)
        self.assertIn("nccl-tests-all-gather-4ranks: 4 ranks half -G 0: PASS (exit 0, 11 sizes, #wrong 0, "
                      "4 communicator ranks eligible, 96 calls taken, 0 forwarded (none))", self.said)
        self.assertEqual(self.mps_actions(), ["start"] + ["restart"] * 6 + ["stop"])

    def test_all_gather_perf_fails_on_a_wrong_element_or_no_call_taken(self):
        for env, unmet in ((dict(FAKE_WRONG="2"), "not met: #wrong 0, Out of bounds values : 0 OK"),
                           (dict(FAKE_TAKEN="0", FAKE_REASONS="too-large=24"),
                            "not met: calls taken, all-gather calls taken by allgather"),
                           (dict(FAKE_TAKEN_AS="all_reduce_perf"),
                            "not met: all-gather calls taken by allgather, no call taken by a kernel of another "
                            "collective")):
            with self.subTest(env=env):
                self.said.clear()
                machine = self.launching_machine(1, NT_DTYPES="float", NT_GRAPH="0", **env)
                self.assertEqual(self.run_scenario("nccl-tests-all-gather-2ranks", machine=machine), FAIL)
                self.assertIn(unmet, "\n".join(self.said))

    def test_reduce_scatter_perf_every_op_on_the_rig(self):
        machine = self.launching_machine(1, FAKE_REASONS="too-large=12")
        self.assertEqual(self.run_scenario("nccl-tests-reduce-scatter-all-ops-2ranks", machine=machine), PASS)
        said = "\n".join(self.said)
        for sweep in ("odd", "small", "unaligned"):
            for op in scenarios_nccl_tests.BUILT_IN_OPS:
                self.assertIn(f"nccl-tests-reduce-scatter-all-ops-2ranks: 2 ranks, {sweep} sizes, {op}: PASS", said)
        log = self.scenario_log("nccl-tests-reduce-scatter-all-ops-2ranks", "nt-ops-n2-unaligned-prod")
        self.assertIn("# Collective test starting: reduce_scatter_perf\n", log)
        self.assertIn("# argv -b 4 -e 1048576 -i 16411 -u 1 -d all -o prod -n 1 -w 0 -c 1\n", log)
        self.assertIn("2 ranks, small sizes, min: PASS (exit 0, 1200 rows (12 types: also f8e4m3 f8e5m2; min), "
                      "#wrong 0, 2 ranks eligible, 48 calls taken, 24 forwarded (too-large=24))", said)
        self.assertEqual(self.mps_actions(), ["start"] + ["restart"] * 15 + ["stop"])
        self.said.clear()
        untaken = self.launching_machine(1, FAKE_TAKEN="0")
        self.assertEqual(self.run_scenario("nccl-tests-reduce-scatter-all-ops-2ranks", machine=untaken), FAIL)
        self.assertIn("2 ranks, odd sizes, sum: FAIL", "\n".join(self.said))
        self.assertIn("reduce-scatter calls taken by reducescatter", "\n".join(self.said))

    def test_an_every_op_scenario_runs_only_the_runs_asked_for(self):
        machine = self.launching_machine(1, FAKE_REASONS="too-large=12")
        status = run_scenario(SCENARIOS["nccl-tests-reduce-scatter-all-ops-2ranks"], machine, self.build, self.logs,
                              say=self.said.append, mps_script=self.mps_script, runs="nt-ops-n2-unaligned-m*")
        self.assertEqual(status, PASS)
        said = "\n".join(self.said)
        for op in ("max", "min"):
            self.assertIn(f"nccl-tests-reduce-scatter-all-ops-2ranks: 2 ranks, unaligned sizes, {op}: PASS", said)
        self.assertNotIn("odd sizes", said)
        self.assertNotIn("small sizes", said)
        self.assertNotIn("unaligned sizes, sum", said)
        self.assertIn("only the runs matching nt-ops-n2-unaligned-m*: 2 of 15", said)
        self.assertEqual(self.mps_actions(), ["start"] + ["restart"] * 2 + ["stop"])
        self.said.clear()
        status = run_scenario(SCENARIOS["nccl-tests-reduce-scatter-all-ops-2ranks"], machine, self.build, self.logs,
                              say=self.said.append, mps_script=self.mps_script, runs="nt-ops-n4-*")
        self.assertEqual(status, FAIL)
        self.assertIn("only the runs matching nt-ops-n4-*: 0 of 15", "\n".join(self.said))

    def test_a_scenario_without_runs_to_choose_says_it_made_them_all(self):
        machine = FakeMachine(env=dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS="32"))
        status = run_scenario(SCENARIOS["allreduce-2ranks"], machine, self.build, self.logs, say=self.said.append,
                              mps_script=self.mps_script, runs="nt-ops-*")
        self.assertEqual(status, PASS)
        self.assertIn("allreduce-2ranks: --runs nt-ops-* does not apply here (only to the every-op scenarios): "
                      "every run was made", "\n".join(self.said))

    def test_all_gather_perf_every_type_on_two_gpus(self):
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-all-gather-all-types",
                                           machine=self.launching_machine(2)), PASS)
        runs = [line for line in self.said if ": PASS (exit " in line]
        self.assertEqual([line.split(": ")[1] for line in runs],
                         ["2 GPUs, odd sizes", "2 GPUs, small sizes", "2 GPUs, unaligned sizes"])
        self.assertIn("120 rows (12 types: also f8e4m3 f8e5m2; none)", runs[0])
        log = self.scenario_log("multi-gpu-nccl-tests-all-gather-all-types", "nt-ops-gpus2-small")
        self.assertIn("# argv -b 24 -e 4800 -i 48 -d all -n 1 -w 0 -c 1 -g 1\n", log)  # no -o: it has no op
        self.assertTrue(f"{self.folder}/all_gather_perf -b 24 " in log)  # mpirun started the one beside all_reduce_perf

    def test_the_other_programs_one_process_per_gpu_and_in_one_process(self):
        machine = self.launching_machine(2)
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-reduce-scatter-mpi", machine=machine), PASS)
        self.assertIn("# argv -b 4 -e 64M -f 4 -c 1 -n 5 -w 2 -o all -d all -g 1\n",
                      self.scenario_log("multi-gpu-nccl-tests-reduce-scatter-mpi", "nt-mpi-all-ops-all-types"))
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-all-gather-mpi", machine=machine), PASS)
        self.assertIn("# argv -b 4 -e 64M -f 4 -c 1 -n 5 -w 2 -d all -g 1\n",
                      self.scenario_log("multi-gpu-nccl-tests-all-gather-mpi", "nt-mpi-all-types"))
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-all-gather-threads", machine=machine), PASS)
        log = self.scenario_log("multi-gpu-nccl-tests-all-gather-threads", "nt-threads-t2-half-G10")
        self.assertIn("# Collective test starting: all_gather_perf\n", log)
        self.assertIn("# argv -b 4 -e 64M -f 4 -c 1 -n 5 -w 2 -d half -t 2 -G 10\n", log)
        wrong = self.launching_machine(2, FAKE_WRONG="1")
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-reduce-scatter-one-process", machine=wrong), FAIL)

    def test_a_missing_program_skips_its_scenarios_saying_where_it_looked(self):
        folder = os.path.join(self.folder, "nccl-tests")
        os.makedirs(folder)
        perf = fake_nccl_tests(folder, programs=("all_reduce_perf",))
        machine = FakeMachine(gpus=2, env=dict(os.environ, ALL_REDUCE_PERF=perf))
        for name in ("nccl-tests-all-gather-2ranks", "multi-gpu-nccl-tests-reduce-scatter-threads"):
            with self.subTest(name=name):
                self.assertEqual(self.run_scenario(name, machine=machine), SKIPPED)
                program = "all_gather_perf" if "gather" in name else "reduce_scatter_perf"
                self.assertEqual(self.said[-1], f"{name}: SKIPPED (no {program}: {folder}/{program} is not an "
                                                f"executable (set {program.upper()} to an MPI build's {program}))")
        self.assertFalse(os.path.exists(self.mps_calls))
        # Its own variable finds it elsewhere.
        elsewhere = os.path.join(self.folder, "elsewhere")
        os.makedirs(elsewhere)
        fake_nccl_tests(elsewhere, programs=("reduce_scatter_perf",))
        named = FakeMachine(gpus=2, env=dict(os.environ, ALL_REDUCE_PERF=perf,
                                             REDUCE_SCATTER_PERF=os.path.join(elsewhere, "reduce_scatter_perf")))
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-reduce-scatter-threads", machine=named), PASS)

    def test_torch_every_op_on_the_rig_and_on_two_gpus(self):
        with mock.patch.object(scenarios_python, "TORCH_OPS", fake_torch_ops(self.folder)):
            self.assertEqual(self.run_scenario("torch-all-ops-4ranks", machine=self.launching_machine(1)), PASS)
            self.assertEqual(self.run_scenario("multi-gpu-torch-all-ops", machine=self.launching_machine(8)), PASS)
            fewer = self.launching_machine(1, FAKE_TAKEN="399")
            self.assertEqual(self.run_scenario("torch-all-ops-2ranks", machine=fewer), FAIL)
            ungathered = self.launching_machine(1, FAKE_GATHERED="0")
            self.assertEqual(self.run_scenario("torch-all-ops-3ranks", machine=ungathered), FAIL)
        said = "\n".join(self.said)
        self.assertIn("torch-all-ops-4ranks: 4 ranks: PASS (exit 0, 4/4 ranks passed, 4 eligible; all-reduce: 1600 "
                      "made, 1600 taken; reduce-scatter: 1920 made, 1920 taken; all-gather: 640 made, 640 taken; "
                      "0 forwarded (none))", said)
        self.assertIn("not met: the 800 all-reduces made taken or too-large", said)
        rig = self.scenario_log("torch-all-ops-4ranks", "torch-ops-n4")
        self.assertIn("# torchrun --standalone --nproc-per-node 4 ", rig)
        self.assertIn(f"rank 3 env LOCAL_RANK=3 E2E_ONE_GPU_PER_RANK=- NCCL_CAR_MAX_BLOCKS=33 NCCL_CAR_DEBUG=INFO "
                      f"LD_PRELOAD={self.build.library} NCCL_NVLS_ENABLE=0", rig)
        gpus = self.scenario_log("multi-gpu-torch-all-ops", "torch-ops-gpus2")
        self.assertIn("# torchrun --standalone --nproc-per-node 2 ", gpus)  # 2 of the 8 GPUs
        self.assertIn("rank 1 env LOCAL_RANK=1 E2E_ONE_GPU_PER_RANK=1 NCCL_CAR_MAX_BLOCKS=- ", gpus)
        self.assertIn("torch-all-ops-3ranks: 3 ranks: FAIL (", said)
        self.assertIn("not met: the 480 all-gathers made taken by allgather", said)
        self.assertEqual(self.mps_actions(), ["start", "restart", "stop"] * 3)

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

    def test_every_way_in_for_the_programs_users_run_is_a_scenario_skipped_without_a_gpu(self):
        """Issue 47's runs: import torch, a PyTorch all-reduce and a ctypes client with PyTorch,
        by every way in."""
        for name in ("ways-in-import-torch", "ways-in-torch-2ranks", "ways-in-ctypes-torch"):
            with self.subTest(name=name):
                self.said.clear()
                self.assertEqual(self.run_scenario(name, machine=FakeMachine(gpus=0)), SKIPPED)
                self.assertIn("needs a GPU, none visible", self.said[-1])
        self.assertFalse(os.path.exists(self.mps_calls))
        self.assertEqual(ways_in.WAYS, ("preload", "audit", "dropin", "tool-preload", "tool-audit", "tool-dropin",
                                        "tool-auto"))

    def test_a_missing_library_fails(self):
        os.remove(self.build.library)
        self.assertEqual(self.run_scenario("allreduce-2ranks"), FAIL)
        self.assertIn("is not built", self.said[-1])

    def test_the_kernels_are_the_build_s(self):
        # A build whose library has one more all-reduce kernel: the runner names it too.
        fake_query = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                  "cli", "fake_query.py")
        with open(self.build.query, "w") as script:
            script.write(f'#!/bin/sh\nFAKE_QUERY_REAL="{cli_support.QUERY_PROGRAM}" FAKE_EXTRA_KERNEL=newshot '
                         f'exec "{sys.executable}" "{fake_query}" "$@"\n')
        real = runner_support.library_kernels(self)
        kernels = Context(self.build, FakeMachine(), self.logs).kernels
        self.assertEqual(kernels, dict(real, **{"all-reduce": real["all-reduce"] + ("newshot",)}))

    def test_a_missing_query_program_fails_the_verdicts_that_count_by_kernel(self):
        os.remove(self.build.query)
        machine = FakeMachine(gpus=2, env=dict(os.environ, ALL_REDUCE_PERF=fake_nccl_tests(self.folder)))
        self.assertEqual(self.run_scenario("multi-gpu-nccl-tests-threads", machine=machine), FAIL)
        self.assertIn(f"multi-gpu-nccl-tests-threads: FAIL ({self.build.query} is not built: the verdicts read the "
                      "library's kernel names from it)", self.said)
        self.assertEqual(self.run_scenario("allreduce-2ranks"), PASS)   # no kernel named: no query needed


class CommandLineTest(unittest.TestCase):
    """What the scenarios that cannot run here as a whole hand to the programs."""

    def test_each_ctypes_mode_brings_the_library_in_its_own_way(self):
        with tempfile.TemporaryDirectory() as folder:
            build = fake_build(folder, programs=())
            context = Context(build, FakeMachine(env={"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/usr/lib"}),
                              os.path.join(folder, "logs"))
            context.dropin_folder = lambda: "/made/dropin"  # nccl-car dropin's, made once per run
            client = ["python3", "ctypes_allreduce.py", "0", "2", "id"]

            def mode(name):
                return scenarios_python.ctypes_command(context, name, client)

            self.assertEqual(mode("audit-name"), (client + ["libnccl.so.2"], {"LD_AUDIT": build.audit_module}))
            self.assertEqual(mode("audit-path"), (client + ["/opt/nccl/lib/libnccl.so.2"],
                                                  {"LD_AUDIT": build.audit_module}))
            self.assertEqual(mode("dropin-name"), (client + ["libnccl.so.2"], {
                "LD_LIBRARY_PATH": "/made/dropin:/opt/nccl/lib:/usr/lib"}))
            tool = ["python3", NCCL_CAR_TOOL, "run", "--lib", build.library]
            self.assertEqual(mode("tool-auto"), (tool + ["--"] + client + ["libnccl.so.2"], {}))
            for way in ("preload", "audit", "dropin"):
                self.assertEqual(mode(f"tool-{way}"), (tool + ["--mode", way, "--"] + client + ["libnccl.so.2"], {}))
            self.assertEqual(mode("preload"), (client + ["libnccl.so.2"], {"LD_PRELOAD": build.library}))
            with self.assertRaises(ValueError):
                mode("tool-sideways")

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
