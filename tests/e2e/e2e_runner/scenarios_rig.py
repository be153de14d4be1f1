"""Our own end-to-end programs through the real NCCL on the one-GPU rig: one process per
rank on GPU 0, under MPS (docs/design.md, "Testing without a multi-GPU machine")."""

import functools

from . import verdicts_programs as verdicts
from .launch import outcomes
from .scenario import register

RIG = ("gpu", "mps", "nccl", "e2e programs")


def allreduce(context, ranks):
    """allreduce_e2e: 3 types x 13 sizes across the 8 MiB limit, in and out of place, eager
    and from a CUDA graph; every sum exact."""
    program = context.build.program("allreduce_e2e")
    blocks = context.rig_blocks(ranks)
    with context.mps():
        context.restart_mps()
        finished = context.run_ranks(f"allreduce-n{ranks}", ranks,
                                     lambda rank, id_file: [program, str(rank), str(ranks), id_file],
                                     lambda rank: context.rig_rank_env("e2e", rank, NCCL_CAR_MAX_BLOCKS=blocks),
                                     limit=150)
    yield f"{ranks} ranks", verdicts.allreduce_ranks(ranks, *outcomes(finished))


def setup_fault(context, fault):
    """NCCL_CAR_TEST_FAULT on rank 1 of 2 at set-up: both ranks forward, sums stay right."""
    program = context.build.program("allreduce_e2e")
    with context.mps():
        context.restart_mps()
        finished = context.run_ranks(f"fault-{fault}", 2, lambda rank, id_file: [program, str(rank), "2", id_file],
                                     lambda rank: context.rig_rank_env(
                                         "fault", rank, NCCL_CAR_TEST_FAULT=fault if rank == 1 else None),
                                     limit=150)
    yield f"{fault} on rank 1", verdicts.setup_fault(*outcomes(finished))


def abort_watchdog(context):
    """abort_e2e: ncclCommAbort from a watchdog thread releases rank 0, spinning in our kernel
    for rank 1, which never joins."""
    program = context.build.program("abort_e2e")
    with context.mps():
        context.restart_mps()
        finished = context.run_ranks("abort", 2, lambda rank, id_file: [program, str(rank), id_file],
                                     lambda rank: context.rig_rank_env("abort", rank), limit=60)
    yield "rank 0 released", verdicts.abort_watchdog(finished[0].returncode, finished[0].text)


# memcheck: NCCL 2.28.9's initialisation asks for the attributes of its kernels for other
# architectures and gets cudaErrorNoKernelImageForDevice by design (8 reports per process,
# all inside ncclInitKernelsForDevice). Our own CUDA API errors are returned and logged by
# the library; memcheck's job here is device accesses.
_SANITIZER_OPTIONS = {"memcheck": ["--report-api-errors", "no"], "racecheck": [], "synccheck": []}


def sanitizer(context, tool):
    """compute-sanitizer TOOL over 2 ranks of allreduce_e2e, sizes up to E2E_MAX_BYTES
    (64 KiB by default: ours and forwarded calls, eager and graph, in and out of place)."""
    program = context.build.program("allreduce_e2e")
    max_bytes = context.machine.env.get("E2E_MAX_BYTES", "65536")
    limit = int(context.machine.env.get("SANITIZER_LIMIT", "120"))
    with context.mps():
        context.restart_mps()
        # The tool's own process loads the preloaded library too, harmlessly: it calls no NCCL.
        finished = context.run_ranks(
            f"sanitizer-{tool}", 2,
            lambda rank, id_file: ["compute-sanitizer", "--tool", tool, *_SANITIZER_OPTIONS[tool], "--error-exitcode",
                                   "3", program, str(rank), "2", id_file],
            lambda rank: context.rig_rank_env("sanitizer", rank, NCCL_CAR_MAX_BLOCKS=4, E2E_MAX_BYTES=max_bytes),
            limit=limit)
    yield f"{tool}, 2 processes", verdicts.sanitizer(*outcomes(finished))


for _ranks in (2, 4, 8):
    register(f"allreduce-{_ranks}ranks", f"allreduce_e2e, {_ranks} processes on one GPU", RIG, 300,
             functools.partial(allreduce, ranks=_ranks))
for _fault in ("ipc-open", "no-buffers"):
    register(f"setup-fault-{_fault}", f"NCCL_CAR_TEST_FAULT={_fault} on one of 2 ranks: both forward", RIG, 300,
             functools.partial(setup_fault, fault=_fault))
register("abort-watchdog", "ncclCommAbort from a watchdog thread releases a rank waiting in our kernel", RIG, 120,
         abort_watchdog)
for _tool in _SANITIZER_OPTIONS:
    register(f"sanitizer-{_tool}", f"compute-sanitizer {_tool} over 2 processes of allreduce_e2e",
             RIG + ("compute-sanitizer",), 300, functools.partial(sanitizer, tool=_tool))
