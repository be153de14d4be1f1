"""What NCCL alone would do must still happen with the library loaded (tests/e2e/guest_e2e.cc):
two processes on the one-GPU rig."""

import functools

from . import verdicts_programs as verdicts
from .launch import outcomes
from .scenario import register

RIG = ("gpu", "mps", "nccl", "e2e programs")
# What each scenario sets beside the library.
_SETTINGS = {"check-pointers": {"NCCL_CHECK_POINTERS": "1"}, "fork": {}}


def guest(context, scenario):
    """guest_e2e SCENARIO on two ranks."""
    program = context.build.program("guest_e2e")
    blocks = context.rig_blocks(2)
    with context.mps():
        context.restart_mps()
        finished = context.run_ranks(
            scenario, 2, lambda rank, id_file: [program, scenario, str(rank), id_file],
            lambda rank: context.rig_rank_env(scenario, rank, NCCL_CAR_MAX_BLOCKS=blocks, **_SETTINGS[scenario]),
            limit=120)
    yield "2 processes on one GPU", verdicts.guest(scenario, *outcomes(finished))


register("check-pointers", "guest_e2e check-pointers: under NCCL_CHECK_POINTERS=1 an all-reduce on host buffers "
         "gets NCCL's ncclInvalidArgument, 2 processes on one GPU", RIG, 240,
         functools.partial(guest, scenario="check-pointers"))
register("fork-child", "guest_e2e fork: a fork()ed child destroys or aborts the communicator it inherited and "
         "does not fault; the parent's all-reduces stay ours and right, 2 processes on one GPU", RIG, 240,
         functools.partial(guest, scenario="fork"))
