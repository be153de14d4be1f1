"""The library's own answers, asked of the query program built with it (tools/query/,
build/tools/nccl_car_query): its NCCL_CAR_* settings as it reads them, and what its policy
does with an all-reduce. The tool parses no setting and repeats no rule of the library."""

import json
import os
import subprocess

from . import paths

PROGRAM = "nccl_car_query"
DEFAULT_PROGRAM = os.path.join(paths.REPO_ROOT, "build", "tools", PROGRAM)


class QueryUnavailable(Exception):
    """No answer from the query program; the text says why, for the degraded report."""


def locate(env, library=None):
    """(path, how it was chosen): $NCCL_CAR_QUERY, else tools/ of the build folder the
    library is in (build/shim/libnccl-car.so -> build/tools/), else this repository's
    build folder."""
    if env.get("NCCL_CAR_QUERY"):
        return os.path.abspath(env["NCCL_CAR_QUERY"]), "NCCL_CAR_QUERY"
    if library:
        beside = os.path.join(os.path.dirname(os.path.dirname(library)), "tools", PROGRAM)
        if os.path.isfile(beside):
            return beside, "the library's build folder"
    return DEFAULT_PROGRAM, "default"


class LibraryQuery:
    def __init__(self, path):
        self.path = path

    def _ask(self, args, env):
        # The environment of a program about to run with the library loaded: the query
        # program itself needs none of that loaded.
        env = {name: value for name, value in env.items() if name not in ("LD_PRELOAD", "LD_AUDIT")}
        try:
            result = subprocess.run([self.path, *args], env=env, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise QueryUnavailable(f"cannot run {self.path}: {error}") from None
        if result.returncode != 0:
            first = (result.stderr.strip().splitlines() or ["no message"])[0]
            raise QueryUnavailable(f"{self.path} {args[0]} exited with {result.returncode}: {first}")
        try:
            return json.loads(result.stdout)
        except ValueError:
            raise QueryUnavailable(f"{self.path} {args[0]} printed no JSON") from None

    def settings(self, env):
        """Every setting (name, type, values, default, agreement, help) with what `env`
        sets, the value the library would use and its WARN for a refused value; the
        NCCL_CAR_* names it does not read; max_ranks; element_types."""
        return self._ask(["settings"], env)

    def decide(self, env, ranks, full_nvlink, compute_capability, sizes, dtype):
        """decideCall's answer ({bytes, ours, algorithm, reason}) for a sum of each size in
        bytes, on a communicator of these facts, under `env`'s settings."""
        args = ["decide", "--ranks", str(ranks), "--compute-capability", str(compute_capability),
                "--type", dtype] + (["--full-nvlink"] if full_nvlink else [])
        return self._ask(args + [str(size) for size in sizes], env)["decisions"]


def find(env, library=None):
    """(LibraryQuery, None), or (None, why not) when the program is not built."""
    path, how = locate(env, library)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None, (f"the query program is not built (no {path}, from {how}): scripts/build.sh "
                      "builds it, NCCL_CAR_QUERY names another")
    return LibraryQuery(path), None
