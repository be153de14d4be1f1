"""Shared by the CLI tests: paths computed from this file (so any working directory
works), the tool run as a subprocess, and a clean environment for it."""

import os
import shutil
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS_DIR = os.path.join(REPO_ROOT, "tools")
TOOL = os.path.join(TOOLS_DIR, "nccl-car")
# ctest names the build it tests; run by hand, the repository's build folder.
BUILD_DIR = os.environ.get("CAR_BUILD_DIR", os.path.join(REPO_ROOT, "build"))
QUERY_PROGRAM = os.path.join(BUILD_DIR, "tools", "nccl_car_query")

if TOOLS_DIR not in sys.path:
    sys.path.insert(0, TOOLS_DIR)

from nccl_car_cli import library_query  # noqa: E402  (needs the path above)


def require_built(test, *paths):
    """For a test of what this build made: each of `paths` missing fails the test under ctest
    (which names the build in CAR_BUILD_DIR and runs after it) and skips it elsewhere, so
    that no test passes there by not running."""
    missing = [path for path in paths if not os.path.exists(path)]
    if missing:
        if "CAR_BUILD_DIR" in os.environ:
            test.fail(f"not built: {', '.join(missing)}")
        test.skipTest(f"not built: {', '.join(missing)}")


def query_program(test):
    """This build's query program, for tests of what the library itself answers
    (require_built)."""
    require_built(test, QUERY_PROGRAM)
    return library_query.LibraryQuery(QUERY_PROGRAM)


def clean_env(**extra):
    """The caller's environment without anything that would change the tool's behaviour
    (NCCL_CAR_*, LD_PRELOAD), plus this build's query program, plus `extra`."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("NCCL_CAR_") and name != "LD_PRELOAD"}
    if os.path.exists(QUERY_PROGRAM):
        env["NCCL_CAR_QUERY"] = QUERY_PROGRAM
    env.update(extra)
    return env


def run_tool(*args, env=None, timeout=120):
    """Runs tools/nccl-car with this interpreter, from a neutral working directory. The
    output is decoded without newline translation, so a "\r" stays a "\r"."""
    result = subprocess.run([sys.executable, TOOL, *args], env=env if env is not None else clean_env(),
                            cwd="/", capture_output=True, timeout=timeout)
    result.stdout = result.stdout.decode()
    result.stderr = result.stderr.decode()
    return result


def _loaded_libm():
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libm.so"):
                return path
    return None


def stand_in_library(folder):
    """A file named libnccl-car.so that the loader can preload without effect: a copy of
    the libm this interpreter already uses (an empty file would also do, but makes the
    loader print an error into every child's stderr)."""
    path = os.path.join(folder, "libnccl-car.so")
    libm = _loaded_libm()
    if libm:
        shutil.copy(libm, path)
    else:
        open(path, "w").close()
    return path


def write_script(path, text):
    with open(path, "w") as stream:
        stream.write(text)
    os.chmod(path, 0o755)
    return path
