"""The library's own answers, asked of the query program built with it (tools/query/,
build/tools/nccl_car_query): its NCCL_CAR_* settings as it reads them, the names and limits
of its policy, what the policy does with an all-reduce, and lines in its log format. The
tool parses no setting, repeats no rule of the library and types none of its names.

Without the query program the values are shown unchecked, and the reports say so."""

import json
import os
import subprocess

from . import paths
from .errors import UsageError

PROGRAM = "nccl_car_query"
DEFAULT_PROGRAM = os.path.join(paths.REPO_ROOT, "build", "tools", PROGRAM)


class QueryUnavailable(Exception):
    """No answer from the query program; the text says why, for the degraded report."""


def locate(env, library=None):
    """(path, how it was chosen): $NCCL_CAR_QUERY, else the one built or installed with the
    library (build/shim/libnccl-car.so -> build/tools/, P/lib/ -> P/bin/), else this
    repository's build folder."""
    if env.get("NCCL_CAR_QUERY"):
        return os.path.abspath(env["NCCL_CAR_QUERY"]), "NCCL_CAR_QUERY"
    if library:
        beside = paths.companion(library, "query")
        if os.path.isfile(beside):
            return beside, "the library's build or install folder"
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
        NCCL_CAR_* names it does not read."""
        return self._ask(["settings"], env)

    def policy(self, env):
        """collectives, max_ranks, algorithms (the kernels' names), kernels ([{name,
        collective, family, copies_bits}]), type_families ([{name, types}]), element_types
        ([{name, bytes}]), ops, forward_reasons: what the policy works with."""
        return self._ask(["policy"], env)

    def decide(self, env, ranks, full_nvlink, compute_capability, sizes, dtype, table=None):
        """planCall's answers for an all-reduce sum of each size in bytes, on a communicator
        of these facts, under `env`'s settings and the choice table `table` ((path,
        fingerprint); None: the built-in rule): decisions ([{bytes, ours, algorithm, reason}]),
        and taken ({collective: {types (with sum), ops (with `dtype`; None for a collective
        without an op)}}): what the policy takes of each collective on that communicator."""
        args = ["decide", "--ranks", str(ranks), "--compute-capability", str(compute_capability),
                "--type", dtype] + (["--full-nvlink"] if full_nvlink else [])
        if table:
            args += ["--table", table[0], "--fingerprint", table[1]]
        return self._ask(args + [str(size) for size in sizes], env)

    def fingerprint(self, env, device=0, nccl_version=None):
        """{description, fingerprint, default_path}: this machine as a choice table sees it,
        under the real NCCL of that version code (ncclGetVersion's); needs the GPU."""
        args = ["fingerprint", "--device", str(device)]
        return self._ask(args + (["--nccl-version", str(nccl_version)] if nccl_version else []), env)

    def table(self, env, path, fingerprint):
        """{path, usable, why, digest, rows: [{collective, ranks, family, from, to, winner}]}:
        whether the library would follow the table at `path` on the machine of `fingerprint`."""
        return self._ask(["table", path, "--fingerprint", fingerprint], env)

    def log_samples(self):
        """[{kind, line, host, pid, level, facts...}]: lines of every kind the log parser
        reads, made by the library's own formatter."""
        return self._ask(["log-samples"], {})["samples"]


def kernels_by_collective(policy):
    """{collective: (kernel names, in the library's order)} from a policy() answer: which of
    the library's kernels (kernels/algorithms.h, kAlgorithms) serve each collective, every
    collective named, those without a kernel with none."""
    return {collective: tuple(kernel["name"] for kernel in policy["kernels"] if kernel["collective"] == collective)
            for collective in policy["collectives"]}


def find(env, library=None):
    """(LibraryQuery, None), or (None, why not) when the program is not built."""
    path, how = locate(env, library)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None, (f"the query program is not built (no {path}, from {how}): scripts/build.sh "
                      "builds it, NCCL_CAR_QUERY names another")
    return LibraryQuery(path), None


# ---- The choice table the library would follow ----

BUILT_IN_TABLE = "builtin"   # NCCL_CAR_TABLE's value for "no table" (plugin/choice_table.h)


def applicable_table(env, query, nccl_version, have_gpu):
    """Which choice table the library would follow under `env` with the real NCCL of version
    code `nccl_version` (None: unknown): NCCL_CAR_TABLE's file, else this machine's in the
    cache folder, read by the library's own parser. {"path", "used", "why" (a sentence when
    not used), "rows" (a count), "digest", "table_rows" ([{collective, ranks, family, from,
    to, winner}]), "decide" ((path, fingerprint) for LibraryQuery.decide, None: the built-in
    rule)}."""
    result = {"path": None, "used": False, "why": None, "rows": 0, "digest": None, "table_rows": [], "decide": None}
    named = env.get("NCCL_CAR_TABLE")
    if named == BUILT_IN_TABLE:
        return dict(result, why=f"none (NCCL_CAR_TABLE={BUILT_IN_TABLE}): the built-in rule")
    if query is None or not have_gpu:
        return dict(result, why="not known (" + ("no query program" if query is None else
                                                 "no GPU to fingerprint this machine") + ")")
    try:
        machine = query.fingerprint(env, 0, nccl_version)
        path = named or machine["default_path"]
        result["path"] = path
        if not path or not os.path.exists(path):
            where = path or "no cache folder: neither XDG_CACHE_HOME nor HOME is set"
            return dict(result, why=f"none for this machine ({where}): the built-in rule; `nccl-car tune` measures "
                                    "this machine and writes one")
        answer = query.table(env, path, machine["fingerprint"])
    except QueryUnavailable as error:
        return dict(result, why=f"not known: {error}")
    if not answer["usable"]:
        return dict(result, why=f"{path} not used ({answer['why']}): the built-in rule; `nccl-car tune` again")
    return dict(result, used=True, rows=len(answer["rows"]), digest=answer["digest"], table_rows=answer["rows"],
                decide=(path, machine["fingerprint"]))


# ---- The NCCL_CAR_* variables, as the library reads them ----

# Read by this tool only: where libnccl-car.so and the query program are.
TOOL_VARIABLES = ("NCCL_CAR_LIB", "NCCL_CAR_QUERY")


def library_variables(env):
    """The NCCL_CAR_* variables `env` sets for the library (the tool's own left out)."""
    return {name: env[name] for name in sorted(env)
            if name.startswith("NCCL_CAR_") and name not in TOOL_VARIABLES}


def effective_settings(env, query, unavailable=None):
    """What the library would run with under `env`, asked of `query` (a LibraryQuery, or
    None with `unavailable` saying why).

    Returns a dict: checked (whether the library was asked), message (why not), values
    ({variable: value the library would use}), problems (the library's sentence for each
    refused value, and each NCCL_CAR_* name it does not read), table (the library's rows)."""
    result = {"checked": False, "message": unavailable, "values": None, "problems": [], "table": None}
    if query is None:
        return result
    try:
        dump = query.settings(env)
    except QueryUnavailable as error:
        result["message"] = str(error)
        return result
    rows = dump["settings"]
    result.update(checked=True, values={row["name"]: row["value"] for row in rows}, table=rows)
    result["problems"] = [row["problem"] for row in rows if row["problem"]] + [
        f"{name} is not a variable nccl-car reads (a typo?)"
        for name in dump["unknown"] if name not in TOOL_VARIABLES]
    return result


def refuse_ignored(requested, base_env, library):
    """Raises UsageError with the library's own sentence for each of `requested`
    ({variable: value}, from command-line options) that it would ignore. Returns None when
    checked, else a note saying why the values went unchecked."""
    if not requested:
        return None
    query, unavailable = find(base_env, library)
    effective = effective_settings({**base_env, **requested}, query, unavailable)
    if not effective["checked"]:
        return f"option values not checked: {effective['message']}"
    refused = [row["problem"] for row in effective["table"] if row["name"] in requested and row["problem"]]
    if refused:
        raise UsageError("the library would ignore it: " + "; ".join(refused))
    return None


def library_disabled(env, library=None):
    """Whether the library reads NCCL_CAR_DISABLE in `env` as "pass everything through";
    False when the query program cannot say."""
    if "NCCL_CAR_DISABLE" not in env:
        return False
    query, unavailable = find(env, library)
    effective = effective_settings(env, query, unavailable)
    return bool(effective["checked"] and effective["values"]["NCCL_CAR_DISABLE"])


def at_least_info(level):
    """The run summary is built from INFO lines: WARN (or nothing) becomes INFO."""
    return "TRACE" if level is not None and level.upper() == "TRACE" else "INFO"
