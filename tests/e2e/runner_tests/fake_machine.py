"""A machine the runner's tests describe instead of probing: so many GPUs, these programs on
PATH, these Python modules; and a build folder whose end-to-end programs are small Python
scripts, so that a whole scenario runs on the CPU."""

import os
import stat
import sys

import runner_support
from cli_support import stand_in_library  # noqa: E402  (runner_support puts tests/cli on the path)
from e2e_runner.build import Build
from e2e_runner.machine import Machine

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
# library's lines and the program's own, and exits as FAKE_EXIT_RANK_<rank> says.
_PROGRAM = """#!{python}
import os, sys
sys.path.insert(0, {support!r})
from runner_support import log, released, setup
shown = ("NCCL_HOSTID", "NCCL_CAR_MAX_BLOCKS", "NCCL_CAR_DEBUG", "NCCL_CAR_TEST_FAULT", "LD_PRELOAD", "LD_AUDIT",
         "NCCL_SOCKET_IFNAME", "CUDA_DEVICE_MAX_CONNECTIONS", "LD_LIBRARY_PATH", "CUDA_MPS_PIPE_DIRECTORY")
print("env", " ".join(name + "=" + os.environ.get(name, "-") for name in shown))
print("argv", " ".join(sys.argv[1:]))
numbers = [int(word) for word in sys.argv[1:3] if word.isdigit()]
rank, ranks = (numbers + [2])[:2] if len(numbers) == 2 else (numbers[0], 2)
sys.stderr.write(log(setup(rank, ranks), released(rank, ranks, taken=(10, 2, 0, 0))))
print(os.environ.get("FAKE_OUTPUT", "rank {{0}}/{{1}}: 156 checks, 0 wrong (0 elements)").format(rank, ranks))
sys.exit(int(os.environ.get("FAKE_EXIT_RANK_" + str(rank), "0")))
"""


def fake_build(folder, programs=("allreduce_e2e", "recovery_e2e")):
    """A build folder under `folder`: the library (the CLI tests' stand-in, which preloads harmlessly)
    and stand-ins for `programs`."""
    build = Build(os.path.join(folder, "build"))
    os.makedirs(os.path.dirname(build.library))
    os.makedirs(os.path.dirname(build.program("x")))
    stand_in_library(os.path.dirname(build.library))
    for program in programs:
        _executable(build.program(program), _PROGRAM.format(python=sys.executable,
                                                            support=os.path.dirname(runner_support.__file__)))
    return build


def fake_mps(folder):
    """An MPS script that only writes down what it was asked (and with which pipe folder)."""
    calls = os.path.join(folder, "mps-calls")
    script = os.path.join(folder, "mps.sh")
    _executable(script, f'#!/usr/bin/env bash\necho "$1 $CUDA_MPS_PIPE_DIRECTORY" >> {calls}\n')
    return script, calls


# A stand-in for nccl-tests' all_reduce_perf: its arguments, then a checked table whose
# #wrong column is FAKE_WRONG (0 by default).
_ALL_REDUCE_PERF = """#!{python}
import os, sys
wrong = os.environ.get("FAKE_WRONG", "0")
print("# argv", " ".join(sys.argv[1:]))
for size in (1024, 2048):
    print(f"{{size:>12}} {{size // 4:>13}}     float     sum      -1     9.81    0.10    0.10  {{wrong:>6}}"
          "     9.46    0.11    0.11       0")
print("# Out of bounds values : " + ("0 OK" if wrong == "0" else wrong + " FAILED"))
"""


def fake_all_reduce_perf(folder):
    path = os.path.join(folder, "all_reduce_perf")
    _executable(path, _ALL_REDUCE_PERF.format(python=sys.executable))
    return path
