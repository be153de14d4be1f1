"""Every way in, for the programs users run (issue 47): `import torch`, a PyTorch all-reduce
(torch_e2e.py, 2 ranks on the one-GPU rig) and a ctypes client that imports PyTorch before it
loads NCCL (as vLLM's and SGLang's PyNccl do), each under LD_AUDIT, a drop-in folder and
`nccl-car run` in every mode (ways_in.py). PyTorch links functions nccl.h lacks (its device
API): under LD_AUDIT and a drop-in folder they must come from the real NCCL behind the front."""

import functools

from . import scenarios_python, ways_in
from . import verdicts_frameworks as verdicts
from .launch import outcomes
from .scenario import register

# Imports PyTorch, then asks the NCCL libtorch_cuda.so links for its version: the import binds
# every NCCL function PyTorch links, the device API's included.
IMPORT_TORCH = ("import torch, torch.distributed as dist\n"
                "print('import torch: ok', torch.__version__, 'nccl', dist.is_nccl_available(), "
                "torch.cuda.nccl.version())\n")


def import_torch(context):
    """`python -c 'import torch'` by every way in."""
    for way in ways_in.WAYS:
        argv, env = ways_in.bring_in(context, way, [context.machine.python, "-c", IMPORT_TORCH],
                                     dict(context.gpu_env(), NCCL_CAR_DEBUG="INFO"))
        run = context.run_one(f"import-torch-{way}", argv, env, 300)
        yield way, verdicts.torch_imported(way, run.returncode, run.text)


# pip's PyTorch finds its NCCL through libtorch_cuda.so's RPATH, which comes before
# LD_LIBRARY_PATH: a drop-in folder cannot reach it (design.md, "Three ways in").
TORCH_UNREACHED = ("dropin", "tool-dropin")


def torch_two_ranks(context):
    """torch_e2e.py under torchrun, 2 ranks on GPU 0, by every way in but LD_PRELOAD alone
    (torch-2ranks is that one): accelerated where the way reaches PyTorch's NCCL, right and
    said to be unreached where it cannot."""
    base = dict(context.rig_env(), NCCL_CAR_DEBUG="INFO", NCCL_CAR_MAX_BLOCKS=str(context.rig_blocks(2)),
                PYTHONUNBUFFERED="1")
    for way in ways_in.WAYS[1:]:
        argv, env = ways_in.bring_in(context, way, scenarios_python.torchrun(2, scenarios_python.TORCH_E2E), base)
        with context.mps():
            context.restart_mps()
            run = context.run_one(f"torch-{way}-n2", argv, env, 400)
        if way in TORCH_UNREACHED:
            yield way, verdicts.torch_unreached(way, 2, run.returncode, run.text)
        else:
            yield way, verdicts.torch_ranks(2, run.returncode, run.text)


CTYPES_TORCH_MODES = ("audit-name", "audit-path", "dropin-name", "tool-audit", "tool-dropin", "tool-auto", "preload")
# The ways that cannot reach this client: LD_PRELOAD never reaches a ctypes handle, and the drop-in
# folder comes after the NCCL PyTorch loaded at import (TORCH_UNREACHED): the client's later
# dlopen by name gets that one.
CTYPES_TORCH_UNREACHED = ("preload", "dropin-name", "tool-dropin")


def ctypes_with_torch(context, mode):
    """ctypes_allreduce.py importing PyTorch first (CTYPES_IMPORT_TORCH=1), 2 ranks."""
    finished = scenarios_python.ctypes_run(context, mode, 2, name="ctypes-torch", CTYPES_IMPORT_TORCH="1")
    yield f"{mode}, 2 ranks", verdicts.ctypes_client(mode, 2, *outcomes(finished),
                                                     reached=mode not in CTYPES_TORCH_UNREACHED)


def ctypes_with_torch_every_way(context):
    for mode in CTYPES_TORCH_MODES:
        yield from ctypes_with_torch(context, mode)


register("ways-in-import-torch", "import torch (it links NCCL's device API) by every way in: LD_PRELOAD, LD_AUDIT, "
         "a drop-in folder, nccl-car run in every mode", ("gpu", "nccl", "torch"), 900, import_torch)
register("ways-in-torch-2ranks", "PyTorch torchrun, 2 ranks on one GPU, under LD_AUDIT, a drop-in folder and "
         "nccl-car run in every mode", scenarios_python.TORCH_RIG, 3000, torch_two_ranks)
register("ways-in-ctypes-torch", "a ctypes client that imports PyTorch first (vLLM's PyNccl), 2 ranks on one GPU, "
         "by every way in", ("gpu", "mps", "nccl", "torch"), 2400, ctypes_with_torch_every_way)
