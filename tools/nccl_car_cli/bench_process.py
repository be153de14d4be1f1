"""One benchmark run as a child process: its own process group, a time limit, and nothing
left running on a GPU when it fails or bench is interrupted."""

import os
import signal
import subprocess

OUTPUT_TAIL_LINES = 15


def run_once(command, env, timeout):
    """(stdout, stderr, failure or None). The run gets its own process group, so that a
    timeout or Ctrl-C ends the launcher and every rank it started."""
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, errors="replace", start_new_session=True)
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        stdout, stderr = child.communicate()
        return stdout, stderr, f"timed out after {timeout} s"
    except BaseException:  # Ctrl-C: leave no rank spinning on a GPU
        _kill_group(child)
        child.wait()
        raise
    if child.returncode < 0:
        return stdout, stderr, f"killed by signal {-child.returncode}"
    if child.returncode != 0:
        return stdout, stderr, f"exited with {child.returncode}"
    return stdout, stderr, None


def _kill_group(child):
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the whole group had already exited


def tail(label, text):
    lines = text.rstrip("\n").splitlines()[-OUTPUT_TAIL_LINES:]
    return [f"    {label}: {line}" for line in lines]
