"""NCCL's group semantics with the library loaded (tests/e2e/groups_e2e.cc): two processes
on the one-GPU rig, with the library and, as the reference, with NCCL alone."""

from . import verdicts_programs as verdicts
from .launch import outcomes
from .scenario import register

RIG = ("gpu", "mps", "nccl", "e2e programs")


def groups(context):
    """groups_e2e: a simulated group, a failed group end, nested groups with the input
    replaced before the end, a captured group, a group over two communicators."""
    program = context.build.program("groups_e2e")
    runs = {}
    with context.mps():
        for name, loaded in (("groups-nccl", False), ("groups", True)):
            def env_of(rank, name=name, loaded=loaded):
                if loaded:
                    return context.rig_rank_env(name, rank)
                return dict(context.rig_env(), NCCL_HOSTID=f"{name}-rank-{rank}")
            context.restart_mps()
            runs[name] = outcomes(context.run_ranks(
                name, 2, lambda rank, id_file: [program, str(rank), "2", id_file], env_of, limit=120))
    yield "2 processes on one GPU", verdicts.groups(2, runs["groups"], runs["groups-nccl"])


register("groups", "groups_e2e: NCCL's group semantics (simulate, failed end, order, capture, two communicators), "
         "2 processes on one GPU", RIG, 300, groups)
