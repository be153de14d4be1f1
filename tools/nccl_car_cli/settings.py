"""The library's NCCL_CAR_* variables, as the library itself reads them.

No value is parsed here: the query program built with the library (library_query.py) reads
the environment with the library's own table (plugin/settings_table.cc) and says what the
library would run with, and which values it would refuse (keeping its default, with a WARN).
Without the query program the values are shown unchecked, and the reports say so."""

from . import library_query
from .errors import UsageError

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
    refused value, and each NCCL_CAR_* name it does not read), max_ranks, element_types,
    table (the library's rows)."""
    result = {"checked": False, "message": unavailable, "values": None, "problems": [],
              "max_ranks": None, "element_types": None, "table": None}
    if query is None:
        return result
    try:
        dump = query.settings(env)
    except library_query.QueryUnavailable as error:
        result["message"] = str(error)
        return result
    rows = dump["settings"]
    result.update(checked=True, values={row["name"]: row["value"] for row in rows},
                  max_ranks=dump["max_ranks"], element_types=dump["element_types"], table=rows)
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
    query, unavailable = library_query.find(base_env, library)
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
    query, unavailable = library_query.find(env, library)
    effective = effective_settings(env, query, unavailable)
    return bool(effective["checked"] and effective["values"]["NCCL_CAR_DISABLE"])


def at_least_info(level):
    """The run summary is built from INFO lines: WARN (or nothing) becomes INFO."""
    return "TRACE" if level is not None and level.upper() == "TRACE" else "INFO"
