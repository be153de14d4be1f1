"""A machine the runner's tests describe instead of probing: so many GPUs, these programs on
PATH, these Python modules; and a build folder whose end-to-end programs are small Python
scripts, so that a whole scenario runs on the CPU."""

import os
import stat
import sys

import runner_support
from cli_support import QUERY_PROGRAM, stand_in_library  # noqa: E402  (runner_support puts tests/cli on the path)
from e2e_runner.build import Build
from e2e_runner.machine import ALL_REDUCE_PERF, NCCL_TESTS_PROGRAMS, Machine

RIG_TOOLS = ("nvidia-cuda-mps-control", "mpirun", "compute-sanitizer", "torchrun")


class FakeMachine(Machine):
    def __init__(self, gpus=1, commands=RIG_TOOLS, modules=("torch",), nccl_lib_dir="/opt/nccl/lib", env=None):
        super().__init__(env=os.environ if env is None else env)
        self._gpus, self._commands, self._modules, self._nccl = gpus, commands, modules, nccl_lib_dir

    @property
    def gpus(self):
        return self._gpus

    @property
    def multiprocessors(self):
        return 132

    @property
    def nccl_lib_dir(self):
        return self._nccl

    def command(self, name):
        return f"/fake/bin/{name}" if name in self._commands else None

    def has_module(self, module):
        return module in self._modules


def _executable(path, text):
    with open(path, "w") as script:
        script.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


# A stand-in for our end-to-end programs: prints the environment the runner gave it, the
# library's lines and the program's own (by default allreduce_e2e's: 14 calls, the 2 above
# 8 MiB forwarded as too-large, the 12 others taken), and exits as FAKE_EXIT_RANK_<rank> says.
_PROGRAM = """#!{python}
import os, sys
sys.path.insert(0, {support!r})
from runner_support import log, released, setup
shown = ("NCCL_HOSTID", "NCCL_CAR_MAX_BLOCKS", "NCCL_CAR_DEBUG", "NCCL_CAR_TEST_FAULT", "LD_PRELOAD", "LD_AUDIT",
         "NCCL_SOCKET_IFNAME", "CUDA_DEVICE_MAX_CONNECTIONS", "LD_LIBRARY_PATH", "CUDA_MPS_PIPE_DIRECTORY",
         "NCCL_CAR_SETUP_TIMEOUT_MS", "NCCL_RUNTIME_CONNECT")
print("env", " ".join(name + "=" + os.environ.get(name, "-") for name in shown))
print("argv", " ".join(sys.argv[1:]))
numbers = [int(word) for word in sys.argv[1:3] if word.isdigit()]
rank, ranks = (numbers + [2])[:2] if len(numbers) == 2 else (numbers[0], 2)
sys.stderr.write(log(setup(rank, ranks), released(rank, ranks, taken=(10, 2, 0, 0), forwarded=2,
                                                  reasons="too-large=2")))
print(os.environ.get("FAKE_OUTPUT", "rank {{0}}/{{1}}: 14 checks (2 above 8388608 bytes), 0 wrong (0 elements)")
      .format(rank, ranks))
sys.exit(int(os.environ.get("FAKE_EXIT_RANK_" + str(rank), "0")))
"""


def fake_build(folder, programs=("allreduce_e2e", "recovery_e2e", "setup_order_e2e")):
    """A build folder under `folder`: the library (the CLI tests' stand-in, which preloads harmlessly),
    stand-ins for `programs`, and as its query program one that runs this build's (the real
    one, cli_support.QUERY_PROGRAM: the library's own names, whatever the stand-ins)."""
    build = Build(os.path.join(folder, "build"))
    os.makedirs(os.path.dirname(build.library))
    os.makedirs(os.path.dirname(build.program("x")))
    os.makedirs(os.path.dirname(build.query))
    stand_in_library(os.path.dirname(build.library))
    _executable(build.query, f'#!/bin/sh\nexec "{QUERY_PROGRAM}" "$@"\n')
    for program in programs:
        _executable(build.program(program), _PROGRAM.format(python=sys.executable, support=_support_folder()))
    return build


def fake_mps(folder):
    """An MPS script that only writes down what it was asked (and with which pipe folder)."""
    calls = os.path.join(folder, "mps-calls")
    script = os.path.join(folder, "mps.sh")
    _executable(script, f'#!/usr/bin/env bash\necho "$1 $CUDA_MPS_PIPE_DIRECTORY" >> {calls}\n')
    return script, calls


# A stand-in for nccl-tests' all_reduce_perf, all_gather_perf and reduce_scatter_perf (the
# name it was started by), alone or as one MPI rank (OMPI_COMM_WORLD_RANK of
# OMPI_COMM_WORLD_SIZE), holding the -g or -t GPUs' communicator ranks: every process prints
# the library's set-up and released: lines of its ranks and the variables the runner gave it;
# process 0 prints its arguments and the table the program would print for them (-b -e -i/-f
# -d -o, "all" included; all_gather_perf's op column "none" whatever -o says; all_gather_perf
# and reduce_scatter_perf count each rank's part, rounded down to whole 16 bytes, and print
# the whole message's size), whose #wrong column is FAKE_WRONG (0 by default). The released:
# lines count FAKE_TAKEN calls (24 by default) taken by the kernels of the program
# FAKE_TAKEN_AS (this one by default: 1shot and 2shot for all_reduce_perf, allgather,
# reducescatter) and forward FAKE_REASONS ("too-large=6 empty=2"). -h prints the usage, which
# names -u (--unalign) unless FAKE_UNALIGN is 0.
_NCCL_TESTS = """#!{python}
import os, sys
sys.path.insert(0, {support!r})
from runner_support import log, released, setup
WORDS = dict(int8=1, uint8=1, int32=4, uint32=4, int64=8, uint64=8, half=2, float=4, double=8, bfloat16=2,
             f8e4m3=1, f8e5m2=1)
OPS = ("sum", "prod", "max", "min", "avg", "mulsum")
program = os.path.basename(sys.argv[0])


def out(line):  # one write a line: the ranks share the log, as under mpirun
    os.write(1, (line + "\\n").encode())


def size(text):
    units = dict(K=1 << 10, M=1 << 20, G=1 << 30)
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def row(nbytes, word, ranks):
    \"\"\"(size, count) as the program prints them for `nbytes` of `word`-byte elements.\"\"\"
    count = nbytes // word
    if program == "all_reduce_perf":
        return count * word, count
    part = (count // ranks) & ~(16 // word - 1)
    return part * ranks * word, part


def taken(count, kernels_of):
    \"\"\"released()'s counts of `count` calls taken by the kernels of the program `kernels_of`.\"\"\"
    if kernels_of == "all_gather_perf":
        return dict(allgather=count)
    if kernels_of == "reduce_scatter_perf":
        return dict(reducescatter=count)
    return dict(taken=(count - count // 6, count // 6, 0, 0))


if sys.argv[1:] == ["-h"]:
    print(f"USAGE: {{program}} \\n\\t[-b,--minbytes <min size in bytes>] \\n\\t" +
          ("[-u,--unalign <index of first element> Misalign source and destination buffers (default: 0)] \\n\\t"
           if os.environ.get("FAKE_UNALIGN") != "0" else "") + "[-h,--help]")
    sys.exit(0)
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
per_process = int(args.get("-g", args.get("-t", "1")))
mine = range(rank * per_process, (rank + 1) * per_process)
ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1")) * per_process
wrong = os.environ.get("FAKE_WRONG", "0")
reasons = os.environ.get("FAKE_REASONS", "")
forwarded = sum(int(pair.split("=")[1]) for pair in reasons.split())
shown = ("NCCL_HOSTID", "NCCL_TESTS_DEVICE", "NCCL_CAR_MAX_BLOCKS", "NCCL_CAR_DEBUG", "LD_PRELOAD")
out(f"# rank {{rank}} env " + " ".join(name + "=" + os.environ.get(name, "-") for name in shown))
os.write(2, log(*[setup(r, ranks) for r in mine]).encode())
if rank == 0:
    out(f"# Collective test starting: {{program}}")
    out("# argv " + " ".join(sys.argv[1:]))
    first, last = size(args.get("-b", "32M")), size(args.get("-e", "32M"))
    step, factor = int(args.get("-i", str(1 << 20))), int(args.get("-f", "1"))
    sizes = [first]
    while True:
        following = sizes[-1] * factor if factor > 1 else sizes[-1] + step
        if following > last:
            break
        sizes.append(following)
    dtype, op = args.get("-d", "float"), args.get("-o", "sum")
    ops = ["none"] if program == "all_gather_perf" else OPS if op == "all" else [op]
    for name in (WORDS if dtype == "all" else [dtype]):
        for redop in ops:
            for nbytes in sizes:
                shown_size, count = row(nbytes, WORDS[name], ranks)
                out(f"{{shown_size:12}}  {{count:12}}  {{name:>8}}  {{redop:>6}}      -1     9.81    0.10"
                    f"    0.10  {{wrong:>5}}     9.46    0.11    0.11      0")
    out("# Out of bounds values : " + ("0 OK" if wrong == "0" else wrong + " FAILED"))
calls = taken(int(os.environ.get("FAKE_TAKEN", "24")), os.environ.get("FAKE_TAKEN_AS", program))
os.write(2, log(*[released(r, ranks, forwarded=forwarded, reasons=reasons, **calls) for r in mine]).encode())
"""


def _support_folder():
    return os.path.dirname(runner_support.__file__)


def fake_nccl_tests(folder, programs=NCCL_TESTS_PROGRAMS):
    """Stand-ins for nccl-tests' `programs` in `folder`; the path of its all_reduce_perf
    (there or not), beside which the runner looks for the others."""
    for program in programs:
        _executable(os.path.join(folder, program), _NCCL_TESTS.format(python=sys.executable,
                                                                      support=_support_folder()))
    return os.path.join(folder, ALL_REDUCE_PERF)


# Stand-ins for the launchers, on one machine: mpirun starts -np copies of the program (each
# with OMPI_COMM_WORLD_RANK and the -x NAME=VALUE settings; a bare -x NAME is inherited, as
# on one machine), torchrun --nproc-per-node copies of the script under this Python (each
# with RANK, LOCAL_RANK, WORLD_SIZE); both print their arguments and exit with the first
# non-zero exit code of their children.
_MPIRUN = """#!{python}
import os, subprocess, sys
args, settings, ranks = sys.argv[1:], {{}}, 1
while args and args[0].startswith("-"):
    flag = args.pop(0)
    if flag == "-np":
        ranks = int(args.pop(0))
    elif flag == "-x":
        name, equals, value = args.pop(0).partition("=")
        if equals:
            settings[name] = value
print("# mpirun", " ".join(sys.argv[1:]), flush=True)
children = [subprocess.Popen(args, env=dict(os.environ, OMPI_COMM_WORLD_RANK=str(rank),
                                            OMPI_COMM_WORLD_SIZE=str(ranks), **settings))
            for rank in range(ranks)]
sys.exit(next((code for code in [child.wait() for child in children] if code), 0))
"""
_TORCHRUN = """#!{python}
import os, subprocess, sys
args = sys.argv[1:]
at = args.index("--nproc-per-node")
processes, script = int(args[at + 1]), args[at + 2:]
print("# torchrun", " ".join(args), flush=True)
children = [subprocess.Popen([sys.executable] + script, env=dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank),
                                                                 WORLD_SIZE=str(processes)))
            for rank in range(processes)]
sys.exit(next((code for code in [child.wait() for child in children] if code), 0))
"""


def fake_launchers(folder):
    """A folder holding mpirun and torchrun stand-ins, to put first on PATH."""
    launchers = os.path.join(folder, "launchers")
    os.makedirs(launchers, exist_ok=True)
    for name, text in (("mpirun", _MPIRUN), ("torchrun", _TORCHRUN)):
        _executable(os.path.join(launchers, name), text.format(python=sys.executable))
    return launchers


# A stand-in for tests/e2e/torch_ops_e2e.py as one torchrun rank: the variables it was given,
# the library's lines (taking FAKE_TAKEN calls by the all-reduce's kernels, FAKE_SCATTERED by
# reducescatter, FAKE_GATHERED by allgather; forwarding FAKE_REASONS) and a PASS line for each
# of its matrices.
_TORCH_OPS = """#!{python}
import os, sys
sys.path.insert(0, {support!r})
from runner_support import log, released, setup
rank, ranks = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
reasons = os.environ.get("FAKE_REASONS", "")
forwarded = sum(int(pair.split("=")[1]) for pair in reasons.split())
shown = ("LOCAL_RANK", "E2E_ONE_GPU_PER_RANK", "NCCL_CAR_MAX_BLOCKS", "NCCL_CAR_DEBUG", "LD_PRELOAD",
         "NCCL_NVLS_ENABLE")
# One write a line: the ranks share torchrun's output, and print's pieces could interleave.
os.write(1, (f"rank {{rank}} env " + " ".join(name + "=" + os.environ.get(name, "-") for name in shown) + "\\n").encode())
os.write(2, log(setup(rank, ranks),
                released(rank, ranks, taken=(int(os.environ.get("FAKE_TAKEN", "400")), 0, 0, 0),
                         reducescatter=int(os.environ.get("FAKE_SCATTERED", "480")),
                         allgather=int(os.environ.get("FAKE_GATHERED", "160")),
                         forwarded=forwarded, reasons=reasons)).encode())
for made, noun, shape in ((400, "all-reduces", "8 types x 5 ops x 5 lengths x 2 placements"),
                          (480, "reduce-scatters", "8 types x 5 ops x 4 lengths x 3 placements"),
                          (96, "all-gathers", "8 types x 4 lengths x 3 placements"),
                          (64, "list all-gathers", "8 types x 4 lengths x 2 placements")):
    os.write(1, f"rank {{rank}}/{{ranks}}: PASS {{made}} {{noun}} ({{shape}}), 0 wrong\\n".encode())
"""


def fake_torch_ops(folder):
    path = os.path.join(folder, "torch_ops_e2e.py")
    _executable(path, _TORCH_OPS.format(python=sys.executable, support=_support_folder()))
    return path
