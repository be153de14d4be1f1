"""What a scenario runs with: the build, the machine, its own log folder, the environments
of environments.py, MPS (started and stopped by tests/e2e/mps.sh, the one piece of shell
left), and the two ways to start processes, both through launch.py."""

import contextlib
import os
import subprocess
import tempfile

from . import environments
from .launch import Launch, run_one, run_together
from .tools_path import NCCL_CAR_TOOL, REPO_ROOT
from nccl_car_cli.library_query import LibraryQuery, QueryUnavailable, kernels_by_collective  # noqa: E402

MPS_SCRIPT = os.path.join(REPO_ROOT, "tests", "e2e", "mps.sh")


class Skip(Exception):
    """Raised by a scenario that finds, once running, that this machine cannot run it."""


class Context:
    def __init__(self, build, machine, logs, say=print, mps_script=MPS_SCRIPT, runs=None):
        self.build = build
        self.machine = machine
        self.logs = logs
        self.say = say
        # A shell pattern: an every-op scenario makes only its runs whose log name matches
        # (run_e2e.py --runs), to finish one a call's time cut short.
        self.runs = runs
        self.runs_chosen = False  # set by a scenario that chose its runs by `runs`
        self._mps_script = mps_script
        self._kernels = None
        self._dropin = None
        os.makedirs(logs, exist_ok=True)

    @property
    def kernels(self):
        """{collective: the library's kernels that serve it}, as the build's query program
        names them (the command-line tool's way of asking it), for the verdicts that count
        calls by kernel. QueryUnavailable when the build lacks the program."""
        if self._kernels is None:
            if not os.access(self.build.query, os.X_OK):
                raise QueryUnavailable(f"{self.build.query} is not built: the verdicts read the library's kernel "
                                       "names from it")
            self._kernels = kernels_by_collective(LibraryQuery(self.build.query).policy({}))
        return self._kernels

    def dropin_folder(self):
        """A drop-in folder for the build's library in front of the machine's NCCL, made once
        by `nccl-car dropin` (as a user makes one) in the logs' folder."""
        if self._dropin is None:
            folder = os.path.join(self.logs, "dropin")
            subprocess.run([self.machine.python, NCCL_CAR_TOOL, "dropin", "--lib", self.build.library, "--nccl-lib",
                            os.path.join(self.machine.nccl_lib_dir, "libnccl.so.2"), folder],
                           env=self.machine.env, check=True, stdout=subprocess.DEVNULL)
            self._dropin = folder
        return self._dropin

    def log(self, name):
        return os.path.join(self.logs, name + ".log")

    def gpu_env(self):
        return environments.gpu_machine(self.machine.env, self.machine.nccl_lib_dir)

    def rig_env(self):
        return environments.rig(self.machine.env, self.machine.nccl_lib_dir)

    def rig_blocks(self, ranks):
        return environments.rig_blocks(self.machine.multiprocessors, ranks)

    def rig_rank_env(self, tag, rank, **settings):
        """Rank `rank` of a rig run: the library loaded, and a host id of its own."""
        return environments.with_library(self.rig_env(), self.build.library, NCCL_HOSTID=f"{tag}-rank-{rank}",
                                         **settings)

    def gpu_rank_env(self, **settings):
        """A process on a machine with a GPU per rank: the library loaded."""
        return environments.with_library(self.gpu_env(), self.build.library, **settings)

    def _mps(self, action):
        subprocess.run(["bash", self._mps_script, action], env=self.rig_env(), check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @contextlib.contextmanager
    def mps(self):
        """MPS up for the body, down after it, whatever happens in between. The GPU's size is
        read first: under MPS a probe would be one more client."""
        self.machine.multiprocessors  # noqa: B018  (read and cached before MPS starts)
        self._mps("start")
        try:
            yield
        finally:
            self._mps("stop")

    def restart_mps(self):
        """A fresh MPS server for each run: a run's clients then never meet a server that an
        earlier run's exit left in a bad state."""
        self._mps("restart")

    def run_ranks(self, name, ranks, command_of, env_of, limit):
        """Starts `ranks` processes together, rank r as command_of(r, id_file) in env_of(r),
        logging to NAME-rR.log; they meet through the NCCL unique id that rank 0 writes into
        id_file (tests/e2e/unique_id_file.h). A list of launch.Finished, by rank."""
        with tempfile.TemporaryDirectory(prefix="nccl-car-e2e-") as folder:
            id_file = os.path.join(folder, "unique-id")
            return run_together([Launch(command_of(rank, id_file), env_of(rank), self.log(f"{name}-r{rank}"), limit)
                                 for rank in range(ranks)])

    def run_one(self, name, argv, env, limit):
        """One process (a launcher such as mpirun or torchrun, or a program of all ranks)."""
        return run_one(Launch(argv, env, self.log(name), limit))
