"""Python programs through the library: PyTorch under torchrun (on the one-GPU rig, and one
process per GPU; its phases, and all-reduce, reduce-scatter and all-gather on every type, with
every op), PyTorch's watchdog abort, a ctypes client as vLLM's PyNccl (each way of bringing the
library in), and JAX through `nccl-car run`."""

import functools
import os

from . import environments, ways_in
from . import verdicts_frameworks as verdicts
from .launch import TIMED_OUT, outcomes
from .scenario import register
from .tools_path import NCCL_CAR_TOOL

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_E2E = os.path.join(_HERE, "torch_e2e.py")
TORCH_OPS = os.path.join(_HERE, "torch_ops_e2e.py")
TORCH_ABORT = os.path.join(_HERE, "torch_abort.py")
CTYPES_CLIENT = os.path.join(_HERE, "ctypes_allreduce.py")
CTYPES_CONFIG_CLIENT = os.path.join(_HERE, "ctypes_allreduce_config.py")
JAX_PSUM = os.path.join(_HERE, "jax_psum.py")

TORCH_RIG = ("gpu", "mps", "nccl", "torch", "torchrun")


def torchrun(processes, script):
    return ["torchrun", "--standalone", "--nproc-per-node", str(processes), script]


def _torch_rig_run(context, name, ranks, script):
    """`script` under torchrun, `ranks` processes on GPU 0 under MPS, the library loaded."""
    env = environments.with_library(context.rig_env(), context.build.library,
                                    NCCL_CAR_MAX_BLOCKS=context.rig_blocks(ranks), PYTHONUNBUFFERED=1)
    env = environments.with_nccl_home_first(env, context.machine.env)
    with context.mps():
        context.restart_mps()
        return context.run_one(name, torchrun(ranks, script), env, 400)


def _torch_gpus_run(context, name, processes, script):
    """`script` under torchrun, one process on each of the first `processes` GPUs."""
    env = environments.with_library(context.gpu_env(), context.build.library, E2E_ONE_GPU_PER_RANK=1,
                                    PYTHONUNBUFFERED=1)
    env = environments.with_nccl_home_first(env, context.machine.env)
    return context.run_one(name, torchrun(processes, script), env, 300)


def torch_rig(context, ranks):
    """torch_e2e.py: eager, graph, two groups at once, re-created and nonblocking communicators."""
    run = _torch_rig_run(context, f"torch-n{ranks}", ranks, TORCH_E2E)
    yield f"{ranks} ranks", verdicts.torch_ranks(ranks, run.returncode, run.text)


def torch_every_op_rig(context, ranks):
    """torch_ops_e2e.py: all_reduce and reduce_scatter_tensor with SUM, AVG, MAX, MIN, PRODUCT,
    all_gather_into_tensor and all_gather, on 8 types, odd lengths and addresses."""
    run = _torch_rig_run(context, f"torch-ops-n{ranks}", ranks, TORCH_OPS)
    yield f"{ranks} ranks", verdicts.torch_every_op(ranks, run.returncode, run.text, kernels=context.kernels)


# PyTorch's watchdog: error handling 1 aborts the communicators (ncclCommAbort) and ends the
# process (its default, 3, ends it without the abort); no flight recorder and no dump.
# PyTorch >= 2.8 sleeps 4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (default 15 s, so a minute)
# between reporting the timeout and aborting, dump or not: make that 4 s.
_WATCHDOG_SETTINGS = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": 1, "TORCH_NCCL_DUMP_ON_TIMEOUT": 0,
                      "TORCH_NCCL_TRACE_BUFFER_SIZE": 0, "TORCH_FR_BUFFER_SIZE": 0,
                      "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": 1000}


def torch_watchdog_abort(context):
    """torch_abort.py: a peer never joins; the job ends with PyTorch's timeout error, well
    before our 60 s limit."""
    env = environments.with_library(context.rig_env(), context.build.library, PYTHONUNBUFFERED=1,
                                    **_WATCHDOG_SETTINGS)
    with context.mps():
        context.restart_mps()
        run = context.run_one("torch-abort", torchrun(2, TORCH_ABORT), env, 60)
    yield "2 ranks, one never joins", verdicts.torch_watchdog_abort(run.returncode, run.seconds, run.text, TIMED_OUT)


def ctypes_command(context, mode, client):
    """One rank's command line and extra environment when the library comes in by `mode`: a
    way in (ways_in.py), the NCCL named (`-name`) or, as JAX loads the NCCL wheel, by its path
    (`-path`)."""
    way, _, named = mode.rpartition("-") if mode.endswith(("-name", "-path")) else (mode, "", "name")
    library = os.path.join(context.machine.nccl_lib_dir, "libnccl.so.2") if named == "path" else "libnccl.so.2"
    argv, env = ways_in.bring_in(context, way, client + [library], {})
    if way == "dropin":  # the folder before the rig's path, where the real NCCL is
        env["LD_LIBRARY_PATH"] = f"{context.dropin_folder()}:{context.rig_env()['LD_LIBRARY_PATH']}"
    return argv, env


CTYPES_MODES = ("audit-name", "audit-path", "dropin-name", "tool-auto", "preload")


def ctypes_run(context, mode, ranks, client=None, name="ctypes", **settings):
    """`ranks` processes of a ctypes client (CTYPES_CLIENT unless named), the library brought in
    by `mode`, `settings` added to their environment."""
    client = client or CTYPES_CLIENT
    extra = ctypes_command(context, mode, [])[1]
    env = dict(context.rig_env(), NCCL_CAR_DEBUG="INFO", NCCL_CAR_MAX_BLOCKS=str(context.rig_blocks(ranks)),
               PYTHONUNBUFFERED="1", **settings)
    env.update(extra)

    def command_of(rank, id_file):
        return ctypes_command(context, mode, [context.machine.python, client, str(rank), str(ranks), id_file])[0]

    with context.mps():
        context.restart_mps()
        return context.run_ranks(f"{name}-{mode}-n{ranks}", ranks, command_of,
                                 lambda rank: dict(env, NCCL_HOSTID=f"ctypes-rank-{rank}"), limit=300)


def ctypes_client(context, mode):
    """ctypes_allreduce.py (NCCL from ctypes.CDLL, every function looked up on that handle),
    2 and 4 processes: 5 sizes up to 8 MiB x 3 types x 3 taken, one size forwarded."""
    for ranks in (2, 4):
        finished = ctypes_run(context, mode, ranks)
        yield f"{mode}, {ranks} ranks", verdicts.ctypes_client(mode, ranks, *outcomes(finished))


def torch_gpus(context):
    """torch_e2e.py with one process per GPU."""
    gpus = context.machine.gpus
    run = _torch_gpus_run(context, f"torch-gpus{gpus}", gpus, TORCH_E2E)
    yield f"one process per GPU, {gpus} GPUs", verdicts.torch_ranks(gpus, run.returncode, run.text)


def torch_every_op_gpus(context):
    """torch_ops_e2e.py with one process on each of GPUs 0 and 1."""
    run = _torch_gpus_run(context, "torch-ops-gpus2", 2, TORCH_OPS)
    yield "one process on each of 2 GPUs", verdicts.torch_every_op(2, run.returncode, run.text,
                                                                   kernels=context.kernels)


def jax_gpus(context):
    """jax_psum.py (XLA loads NCCL itself) in one process across the GPUs, through
    `nccl-car run`: without --mode (it must choose audit), and with --mode preload (which
    cannot reach XLA's NCCL; the summary must say so). JAX never destroys its communicators:
    the summary counts their calls from the lines they say at exit."""
    tool = [context.machine.python, NCCL_CAR_TOOL, "run", "--lib", context.build.library]
    program = ["--", context.machine.python, JAX_PSUM]
    env = dict(context.gpu_env(), PYTHONUNBUFFERED="1")
    run = context.run_one("jax-auto", tool + program, env, 900)
    yield "nccl-car run (auto)", verdicts.jax_through_tool(run.returncode, run.text)
    run = context.run_one("jax-preload", tool + ["--mode", "preload"] + program, env, 900)
    yield "nccl-car run --mode preload", verdicts.jax_preloaded(run.returncode, run.text)


for _ranks in (2, 4, 8):
    register(f"torch-{_ranks}ranks", f"PyTorch torchrun, {_ranks} ranks on one GPU", TORCH_RIG, 600,
             functools.partial(torch_rig, ranks=_ranks))
for _ranks in (2, 3, 4, 8):
    register(f"torch-all-ops-{_ranks}ranks",
             f"PyTorch all_reduce, reduce_scatter_tensor (every op), all_gather_into_tensor, all_gather on 8 types "
             f"at odd lengths, {_ranks} ranks on one GPU", TORCH_RIG, 600,
             functools.partial(torch_every_op_rig, ranks=_ranks))
register("torch-watchdog-abort", "PyTorch's watchdog aborts a communicator whose peer never joins", TORCH_RIG, 120,
         torch_watchdog_abort)
for _mode in CTYPES_MODES:
    register(f"ctypes-{_mode}", f"a ctypes client (PyNccl's way), library by {_mode}, 2 and 4 ranks on one GPU",
             ("gpu", "mps", "nccl"), 900, functools.partial(ctypes_client, mode=_mode))


def ctypes_config(context):
    """ctypes_allreduce_config.py under LD_AUDIT: ncclAllReduceConfig with a completion event
    and our kernel option, over NCCL 2.32 or newer."""
    finished = ctypes_run(context, "audit-name", 2, CTYPES_CONFIG_CLIENT, "ctypes-config")
    yield "audit-name, 2 ranks", verdicts.ctypes_config(2, *outcomes(finished))


register("ctypes-config", "a ctypes client calling ncclAllReduceConfig (completion event, our kernel option), 2 ranks "
         "on one GPU", ("gpu", "mps", "nccl", "nccl 2.32"), 600, ctypes_config)
register("multi-gpu-torch", "PyTorch torchrun, one process per GPU", ("2 gpus", "nccl", "torch", "torchrun"), 400,
         torch_gpus)
register("multi-gpu-torch-all-ops", "PyTorch all_reduce, reduce_scatter_tensor (every op), all_gather_into_tensor, "
         "all_gather on 8 types at odd lengths, one process on each of 2 GPUs", ("2 gpus", "nccl", "torch", "torchrun"), 400, torch_every_op_gpus)
register("multi-gpu-jax", "JAX psum across the GPUs through nccl-car run (auto: LD_AUDIT; and preload)",
         ("2 gpus", "nccl", "jax"), 1900, jax_gpus)
