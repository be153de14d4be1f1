"""NCCL 2.29+'s ways for a communicator to change (tests/e2e/newer_api_e2e.cc), on the one-GPU
rig over an NCCL that has them (tests/e2e/nccl-version-check.sh brings 2.32.3)."""

import functools

from . import verdicts_programs as verdicts
from .launch import outcomes
from .scenario import register

RIG_2_32 = ("gpu", "mps", "nccl", "nccl 2.32", "e2e programs")
_RANKS = {"suspend": 2, "grow": 3}


def newer_api(context, scenario):
    """newer_api_e2e SCENARIO: suspend on 2 ranks; grow from 2 ranks to 3."""
    program = context.build.program("newer_api_e2e")
    ranks = _RANKS[scenario]
    blocks = context.rig_blocks(ranks)
    with context.mps():
        context.restart_mps()
        finished = context.run_ranks(
            scenario, ranks, lambda rank, id_file: [program, scenario, str(rank), id_file],
            lambda rank: context.rig_rank_env(scenario, rank, NCCL_CAR_MAX_BLOCKS=blocks), limit=120)
    yield f"{ranks} processes on one GPU", verdicts.newer_api(scenario, *outcomes(finished))


register("suspend", "newer_api_e2e suspend: ncclCommSuspend(NCCL_SUSPEND_MEM) releases our side, the communicator "
         "is NCCL's after ncclCommResume, 2 processes on one GPU", RIG_2_32, 240,
         functools.partial(newer_api, scenario="suspend"))
register("grow", "newer_api_e2e grow: a 2-rank communicator grown to 3 (blocking) is set up and taken on every rank, "
         "3 processes on one GPU", RIG_2_32, 240, functools.partial(newer_api, scenario="grow"))
