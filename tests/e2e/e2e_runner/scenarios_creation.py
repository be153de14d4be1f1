"""Creating communicators while the program's own kernel runs (tests/e2e/creation_e2e.cu):
two processes on the one-GPU rig, with NCCL alone (the reference) and with the library, on
communicators it takes and on ones it does not."""

from . import verdicts_programs as verdicts
from .launch import outcomes
from .scenario import register

RIG = ("gpu", "mps", "nccl", "e2e programs")


def creation(context):
    """creation_e2e with the spinning kernel on a stream of the program's and on the legacy
    stream: ncclCommInitRank and ncclCommSplit must return while it spins wherever NCCL's own
    do, with and without our set-up."""
    program = context.build.program("creation_e2e")
    # A checked setting that differs on rank 1 makes every communicator not ours.
    blocks = context.rig_blocks(2)
    runs = {}
    with context.mps():
        for stream in ("user", "legacy"):
            for kind in ("nccl", "eligible", "ineligible"):
                name = f"creation-{kind}-{stream}"

                def env_of(rank, name=name, kind=kind):
                    if kind == "nccl":
                        return dict(context.rig_env(), NCCL_HOSTID=f"{name}-rank-{rank}")
                    differing = blocks - 1 if kind == "ineligible" and rank == 1 else blocks
                    return context.rig_rank_env(name, rank, NCCL_CAR_MAX_BLOCKS=differing)
                context.restart_mps()
                runs[(kind, stream)] = outcomes(context.run_ranks(
                    name, 2, lambda rank, id_file, stream=stream: [program, str(rank), "2", id_file, stream],
                    env_of, limit=90))
    yield "2 processes on one GPU", verdicts.creation(2, runs)


def gpu_memory_budget(context):
    """creation_e2e with NCCL_CAR_GPU_MEMORY_BYTES of one default buffer block: the first
    communicator is ours, the two created while it lives are not."""
    program = context.build.program("creation_e2e")
    blocks = context.rig_blocks(2)
    with context.mps():
        context.restart_mps()
        finished = context.run_ranks(
            "budget", 2, lambda rank, id_file: [program, str(rank), "2", id_file, "user"],
            lambda rank: context.rig_rank_env("budget", rank, NCCL_CAR_MAX_BLOCKS=blocks,
                                              NCCL_CAR_GPU_MEMORY_BYTES=ONE_BLOCK_BYTES), limit=90)
    yield "2 processes on one GPU", verdicts.gpu_memory_budget(2, *outcomes(finished))


# The buffer block of a communicator with the default settings (its setup: line says so).
ONE_BLOCK_BYTES = 50337280

register("creation", "creation_e2e: ncclCommInitRank and ncclCommSplit return while the program's kernel spins "
         "(its stream, the legacy stream), taken or not, 2 processes on one GPU", RIG, 600, creation)
register("gpu-memory-budget", "creation_e2e under NCCL_CAR_GPU_MEMORY_BYTES of one block: the first communicator "
         "ours, the next two NCCL's, 2 processes on one GPU", RIG, 180, gpu_memory_budget)
