"""NCCL's recovery paths with the library loaded, and when our buffer blocks are freed,
through the real NCCL: two processes on the one-GPU rig, and with 2 or more GPUs, one
process of all GPUs (ncclCommInitAll) and processes driving two GPUs each."""

import functools

from . import environments
from . import verdicts_programs as verdicts
from .launch import outcomes
from .scenario import register

RIG = ("gpu", "mps", "nccl", "e2e programs")
# destroy-alone waits out our 30 s bound at destroy.
_LIMITS = {"destroy-alone": 120}


def recovery(context, scenario):
    """recovery_e2e SCENARIO: rank 0 waits in our kernel for rank 1 (which never joins the
    all-reduce) and ends the wait through one recovery path."""
    program = context.build.program("recovery_e2e")
    blocks = context.rig_blocks(2)  # both ranks' blocks resident on one GPU at once

    def env_of(rank):
        fault = "launch-error" if scenario == "ineligible-abort" and rank == 0 else None
        return context.rig_rank_env(scenario, rank, NCCL_CAR_MAX_BLOCKS=blocks, NCCL_CAR_TEST_FAULT=fault)

    with context.mps():
        context.restart_mps()
        finished = context.run_ranks(scenario, 2, lambda rank, id_file: [program, scenario, str(rank), id_file],
                                     env_of, limit=_LIMITS.get(scenario, 60))
    returncodes, logs = outcomes(finished)
    yield scenario, verdicts.recovery(scenario, returncodes, logs[0], logs[1])


def release_processes(context):
    """release_e2e processes: a peer 1 s and 4 s late at destroy, and one joining an aborted
    all-reduce late; rank 0's block is waited for, kept, and freed later."""
    program = context.build.program("release_e2e")
    blocks = context.rig_blocks(2)
    with context.mps():
        context.restart_mps()
        finished = context.run_ranks("release", 2, lambda rank, id_file: [program, "processes", str(rank), id_file],
                                     lambda rank: context.rig_rank_env("release", rank, NCCL_CAR_MAX_BLOCKS=blocks),
                                     limit=90)
    yield "between processes", verdicts.release_processes(*outcomes(finished))


def release_initall(context):
    """release_e2e initall: one process, every GPU (up to 8) in one ncclCommInitAll."""
    program = context.build.program("release_e2e")
    ranks = min(context.machine.gpus, 8)
    with context.mps():
        context.restart_mps()
        env = environments.with_library(context.rig_env(), context.build.library)
        run = context.run_one("initall", [program, "initall", str(ranks)], env, 120)
    yield f"one process, {ranks} GPUs", verdicts.release_initall(ranks, run.returncode, run.text)


def release_devices(context):
    """release_e2e devices: 2 processes driving GPUs 0 and 1 each (as nccl-tests -g 2 under
    MPI), E2E_CYCLES (default 100) split/all-reduce/destroy cycles: not ours, so every one
    must forward and stay right."""
    program = context.build.program("release_e2e")
    cycles = context.machine.env.get("E2E_CYCLES", "100")
    blocks = context.rig_blocks(2)
    with context.mps():
        context.restart_mps()
        finished = context.run_ranks(
            "devices", 2, lambda rank, id_file: [program, "devices", str(rank), "2", id_file, cycles, "0,1"],
            lambda rank: context.rig_rank_env("devices-process", rank, NCCL_CAR_MAX_BLOCKS=blocks), limit=300)
    yield "-g 2 in 2 processes", verdicts.release_devices(*outcomes(finished))


for _scenario in verdicts.RECOVERY_EVIDENCE:
    register(f"recovery-{_scenario}", f"recovery_e2e {_scenario}: 2 processes on one GPU", RIG,
             2 * _LIMITS.get(_scenario, 60), functools.partial(recovery, scenario=_scenario))
register("release-processes", "release_e2e processes: late peers at destroy and abort", RIG, 180, release_processes)
register("multi-gpu-release-initall", "release_e2e initall: ncclCommInitAll over every GPU, one process",
         ("2 gpus", "mps", "nccl", "e2e programs"), 240, release_initall)
register("multi-gpu-release-devices", "release_e2e devices: 2 processes driving 2 GPUs each forward",
         ("2 gpus", "mps", "nccl", "e2e programs"), 600, release_devices)
