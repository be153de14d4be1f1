"""The PCIe case on the one-GPU rig. NCCL_CAR_TEST_FAULT=pcie (a test-only switch,
shim/exports/fault_injection.h) makes every rank's set-up see its peers' GPUs over PCIe
without NVLink (shim/handshake/topology.h), so the rig runs the library's PCIe path end to
end: not eligible, every call to NCCL, until tuned; `nccl-car tune --one-gpu` writing a table of the PCIe
case, and allreduce_e2e following it with every sum exact. Nothing here is a PCIe figure: the
ranks share one GPU, and the times tune takes are the rig's."""

import json
import os
import subprocess
import sys
import tempfile

from . import verdicts_pcie as verdicts
from .context import Skip
from .launch import outcomes
from .scenario import register
from .tools_path import NCCL_CAR_TOOL

RIG = ("gpu", "mps", "nccl", "e2e programs")
RANKS = 2


def _allreduce(context, name, folder, **settings):
    program = context.build.program("allreduce_e2e")
    blocks = context.rig_blocks(RANKS)
    context.restart_mps()
    return context.run_ranks(name, RANKS, lambda rank, id_file: [program, str(rank), str(RANKS), id_file],
                             lambda rank: context.rig_rank_env(name, rank, NCCL_CAR_TEST_FAULT="pcie",
                                                               NCCL_CAR_MAX_BLOCKS=blocks, XDG_CACHE_HOME=folder,
                                                               **settings),
                             limit=150)


def _table(query, path):
    """The query program's answer on the table at `path` (its own fingerprint line), None
    without a file."""
    if not os.path.exists(path):
        return None
    with open(path) as stream:
        fingerprint = next((line.split()[1] for line in stream if line.startswith("fingerprint ")), "0" * 16)
    answer = subprocess.run([query, "table", path, "--fingerprint", fingerprint], capture_output=True, text=True,
                            check=False)
    return json.loads(answer.stdout) if answer.returncode == 0 else None


def pcie_rig(context):
    """The PCIe case, 2 processes on one GPU under MPS: untuned, then tuned, then followed."""
    bench = context.build.program("car_nccl_bench")
    if not os.access(bench, os.X_OK) or not os.access(context.build.query, os.X_OK):
        raise Skip(f"{bench} or {context.build.query} is not built")
    with tempfile.TemporaryDirectory(prefix="nccl-car-pcie-") as folder, context.mps():
        finished = _allreduce(context, "pcie-untuned", folder)
        yield "untuned: every call to NCCL", verdicts.untuned(RANKS, *outcomes(finished))

        path = os.path.join(folder, "pcie.table")
        env = dict(context.rig_env(), NCCL_CAR_TEST_FAULT="pcie", NCCL_CAR_QUERY=context.build.query,
                   XDG_CACHE_HOME=folder)
        context.restart_mps()
        run = context.run_one("pcie-tune", [sys.executable, NCCL_CAR_TOOL, "tune", "--one-gpu", "--ranks", str(RANKS),
                                            "--collectives", "all-reduce", "--families", "half,float", "--repeats",
                                            "1", "--samples", "5", "--seed", "1", "--lib", context.build.library,
                                            "--car-nccl-bench", bench, "--output", path], env, 900)
        table = _table(context.build.query, path)
        yield "nccl-car tune --one-gpu writes a PCIe table", verdicts.tuned_table(run.returncode, run.text, table)
        if not table or not table["usable"]:
            return

        finished = _allreduce(context, "pcie-tuned", folder, NCCL_CAR_TABLE=path, NCCL_CAR_DEBUG="TRACE")
        yield "tuned: the table followed, sums exact", verdicts.following(RANKS, *outcomes(finished), table["rows"])


register("pcie-rig", "the PCIe case on one GPU (test topology): untuned forwards everything, tune writes a PCIe "
         "table, allreduce_e2e follows it with exact sums", RIG, 1500, pcie_rig)
