"""Shared by the runner's tests: the runner (and the CLI tests' helpers) on the import path,
and log lines as the library and our programs print them, to build canned logs from."""

import os
import sys

E2E_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI_TESTS_DIR = os.path.join(os.path.dirname(E2E_DIR), "cli")
for folder in (E2E_DIR, CLI_TESTS_DIR):  # the runner; the CLI tests' helpers
    if folder not in sys.path:
        sys.path.insert(0, folder)

from e2e_runner.verdict import FAIL, PASS, SKIPPED  # noqa: E402,F401  (needs the path above)
import cli_support  # noqa: E402  (tests/cli, on the path above)
from nccl_car_cli.library_query import kernels_by_collective  # noqa: E402  (tools/: cli_support)


def library_kernels(test):
    """{collective: kernel names} as this build's query program gives them, the way the
    runner reads them (context.kernels): a test of a verdict that counts calls by kernel
    fails under ctest without the program (cli_support.require_built), skips elsewhere."""
    return kernels_by_collective(cli_support.query_program(test).policy({}))

_PREFIX = "gpu-node:{pid}:{pid} [0] NCCL-CAR INFO comm 0x{comm:x} rank {rank}/{ranks} "


def setup(rank, ranks, pid=1000, comm=0x55d0, eligible=True, why="ranks span 2 hosts"):
    detail = ("eligible (ipc peers, full nvlink, sm_90, up to 8388608 bytes; holds 50337280 bytes; from call 0)" if eligible
              else f"not eligible: {why}")
    return _PREFIX.format(pid=pid + rank, comm=comm, rank=rank, ranks=ranks) + "setup: " + detail


def released(rank, ranks, pid=1000, comm=0x55d0, taken=(0, 0, 0, 0), forwarded=0, reasons="", nbytes=None,
             allgather=0, reducescatter=0):
    """The library's released: line: `taken` by the all-reduce's kernels (1shot, 2shot, 1stage,
    2stage), `allgather` and `reducescatter` by the other collectives' kernels, every kernel
    named in the library's order (push kernels first)."""
    one, two, pull_one, pull_two = taken
    kernels = (("1shot", one), ("2shot", two), ("allgather", allgather), ("reducescatter", reducescatter),
               ("1stage", pull_one), ("2stage", pull_two))
    shots = " ".join(f"{kernel}={count}" for kernel, count in kernels)
    calls = sum(count for _, count in kernels)
    line = (_PREFIX.format(pid=pid + rank, comm=comm, rank=rank, ranks=ranks) +
            f"released: taken {shots} ({nbytes if nbytes is not None else 4096 * calls} bytes) "
            f"forwarded {forwarded}")
    return line + (f" ({reasons})" if reasons else "")


def warn(text, rank=0, pid=1000):
    return f"gpu-node:{pid + rank}:{pid + rank} [0] handshake.cc:88 NCCL-CAR WARN {text}"


def info(text, rank=0, pid=1000):
    return f"gpu-node:{pid + rank}:{pid + rank} [0] NCCL-CAR INFO {text}"


def log(*lines):
    return "\n".join(lines) + "\n"
