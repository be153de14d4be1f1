"""Faults and leaks that need GPUs of their own: NVML missing on one of 3 ranks over 2 or
more GPUs, and communicator life-cycles with real IPC peers (on one GPU, 2
processes under MPS, as on the rig)."""

from . import requirements
from . import verdicts_programs as verdicts
from .context import Skip
from .launch import outcomes
from .scenario import register


def no_nvml(context):
    """allreduce_e2e with NCCL_CAR_TEST_FAULT=no-nvml on rank 1: NVLink cannot be confirmed, so
    every rank forwards. It takes 3 ranks: 2 may do without NVLink (docs/design.md, "The
    verdicts"). One process on each of up to 4 GPUs; with 2 GPUs, 3 processes on GPUs 0, 1
    and 0 under MPS, each with a host id of its own as on the rig (NCCL then talks over
    sockets; the library still sees one host)."""
    program = context.build.program("allreduce_e2e")
    fault = {1: "no-nvml"}
    if context.machine.gpus >= 3:
        ranks = min(context.machine.gpus, 4)
        finished = context.run_ranks(
            "no-nvml", ranks, lambda rank, id_file: [program, str(rank), str(ranks), id_file, str(rank)],
            lambda rank: context.gpu_rank_env(NCCL_CAR_TEST_FAULT=fault.get(rank)), limit=150)
        where = f"{ranks} GPUs"
    else:
        reason = requirements.missing(("mps",), context.machine, context.build)
        if reason:
            raise Skip(reason)
        devices = (0, 1, 0)
        with context.mps():
            context.restart_mps()
            finished = context.run_ranks(
                "no-nvml", len(devices),
                lambda rank, id_file: [program, str(rank), str(len(devices)), id_file, str(devices[rank])],
                lambda rank: context.rig_rank_env("no-nvml", rank, NCCL_CAR_TEST_FAULT=fault.get(rank),
                                                  NCCL_CAR_MAX_BLOCKS=context.rig_blocks(len(devices))),
                limit=150)
        where = "2 GPUs (3 processes on GPUs 0, 1, 0; MPS)"
    yield f"no-nvml on rank 1, {where}", verdicts.no_nvml(*outcomes(finished))


def cycles(context):
    """cycles_e2e, E2E_CYCLES (default 150) split/all-reduce/destroy cycles on 2 ranks: on
    GPUs 0 and 1, or with one GPU, 2 processes on it under MPS. Device memory, open files
    and mappings end where they started."""
    program = context.build.program("cycles_e2e")
    count = context.machine.env.get("E2E_CYCLES", "150")
    if context.machine.gpus >= 2:
        finished = context.run_ranks("cycles", 2, lambda rank, id_file: [program, str(rank), "2", id_file, count,
                                                                         str(rank)],
                                     lambda rank: context.gpu_rank_env(), limit=300)
        where = "2 GPUs"
    else:
        reason = requirements.missing(("mps",), context.machine, context.build)
        if reason:
            raise Skip(reason)
        with context.mps():
            context.restart_mps()
            finished = context.run_ranks("cycles", 2, lambda rank, id_file: [program, str(rank), "2", id_file, count,
                                                                             "0"],
                                         lambda rank: context.rig_rank_env("cycles", rank), limit=300)
        where = "1 GPU (2 processes, MPS)"
    yield f"{count} cycles on {where}", verdicts.cycles(int(count), *outcomes(finished))


register("multi-gpu-no-nvml", "NVML missing on one of 3 ranks over 2 or more GPUs: every rank forwards",
         ("2 gpus", "nccl", "e2e programs"), 240, no_nvml)
register("cycles", "communicator life-cycles with real IPC peers leave nothing behind (2 GPUs, or 1 under MPS)",
         ("gpu", "nccl", "e2e programs"), 400, cycles)
