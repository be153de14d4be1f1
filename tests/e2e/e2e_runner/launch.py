"""The one place that starts processes and waits for them.

Every end-to-end run is a few processes started together (one per rank, or one launcher
such as mpirun or torchrun) that must all be waited for, each within its own time limit,
each writing stdout and stderr into its own log file."""

import os
import signal
import subprocess
import time
from dataclasses import dataclass

# What timeout(1) answers for a command it stopped: the runs' verdicts read it the same way.
TIMED_OUT = 124
# After SIGTERM, how long a stopped process group gets before SIGKILL.
_GRACE_SECONDS = 5


@dataclass
class Launch:
    argv: list
    env: dict
    log: str            # file for the process's stdout and stderr
    limit: float        # seconds
    cwd: str | None = None


@dataclass
class Finished:
    launch: Launch
    returncode: int     # TIMED_OUT when the limit ended it; 128 + N when signal N did
    seconds: float

    @property
    def text(self):
        with open(self.launch.log, encoding="utf-8", errors="replace") as log:
            return log.read()


def _start(launch):
    with open(launch.log, "wb") as log:
        # A session of its own: at the limit, its whole group (mpirun's or torchrun's
        # children too) is stopped, and nothing else.
        return subprocess.Popen(launch.argv, env=launch.env, cwd=launch.cwd, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop_group(process):
    for signum, grace in ((signal.SIGTERM, _GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _returncode(code):
    return 128 - code if code < 0 else code


def run_together(launches):
    """Starts every launch at once and waits for all of them; a list of Finished in the
    same order. A program that cannot be started counts as exit 127, as in a shell."""
    started = []
    for launch in launches:
        begin = time.monotonic()
        try:
            started.append((launch, _start(launch), begin))
        except OSError as error:
            with open(launch.log, "a") as log:
                log.write(f"e2e runner: cannot start {launch.argv[0]}: {error}\n")
            started.append((launch, None, begin))
    finished = []
    for launch, process, begin in started:
        if process is None:
            finished.append(Finished(launch, 127, 0.0))
            continue
        try:
            code = _returncode(process.wait(timeout=max(0.0, begin + launch.limit - time.monotonic())))
        except subprocess.TimeoutExpired:
            _stop_group(process)
            code = TIMED_OUT
        finished.append(Finished(launch, code, time.monotonic() - begin))
    return finished


def run_one(launch):
    return run_together([launch])[0]


def outcomes(finished):
    """The exit codes and the logs of finished runs, in their order."""
    return [run.returncode for run in finished], [run.text for run in finished]
