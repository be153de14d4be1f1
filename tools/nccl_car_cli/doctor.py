"""nccl-car doctor: what this machine offers, and what the library would do here.

The verdict: which communicators the GPUs here could form, and what the library's own
policy (plugin/policy.cc, asked through the query program) does with the all-reduces of
each. The tool only finds groups of GPUs; which calls are taken, by which kernel, and why
the others are not, is the library's answer."""

import argparse
import importlib.metadata
import importlib.util
import itertools
import json
import os
import sys

from . import gpu_probe, host_probe, library_query, options, paths, routes
from .errors import EXIT_OK
from .library_query import QueryUnavailable
from .units import format_size

DESCRIPTION = """\
Reports the GPUs (name, PCI bus id), P2P access and NVLink between each pair, the
libnccl.so.2 the library would forward to and its version beside the nccl.h the library
was built against (a warning when the real one is newer), whether MPS runs, IPC facts,
where libnccl-car.so and its audit module are, the Python packages here that load NCCL
themselves or link it (and so which --mode of `nccl-car run` they need), the NCCL_CAR_*
variables set, which case the machine is for the library (NVLink, or PCIe, tuned by `nccl-car
tune` or not), and a verdict: which all-reduces the library would run on its own kernels here. With `-- COMMAND ...` it also says which mode that command needs. Works without a
GPU or driver.

exit codes: 0 the report was printed (whatever it says: read the verdict or --json),
2 usage error."""


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    options.add_library_option(parser, "to look for")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                        help="a program to say the mode for, after --")


# ---- The verdict: groups of GPUs, and the library's decisions on each ----
SAMPLE_TYPE = "bf16"
SMALLEST_SAMPLE = 16


def _connected(matrix, group):
    return all(matrix[i][j] and matrix[j][i] for i, j in itertools.combinations(group, 2))


def _first_group(matrix, n, size):
    return next((list(group) for group in itertools.combinations(range(n), size)
                 if _connected(matrix, group)), None)


def _compute_capability(gpus, group):
    """major * 10 + minor when every GPU of the group has the same, else 0 (as the handshake)."""
    found = {gpus["gpus"][i]["compute_capability"] for i in group}
    if len(found) != 1:
        return 0
    major, _, minor = found.pop().partition(".")
    return int(major) * 10 + int(minor or 0)


def candidate_communicators(gpus, max_ranks):
    """For each world size from 2 to one past the library's limit: a group of GPUs with P2P
    between every pair (a rank maps its peers' buffers through it), NVLink between every
    pair if there is such a group."""
    n = len(gpus["gpus"])
    p2p, nvlink = gpus["p2p"], gpus["nvlink"]
    linked = [[p2p[i][j] and nvlink is not None and nvlink[i][j] for j in range(n)] for i in range(n)]
    found = []
    for size in range(2, min(n, max_ranks + 1) + 1):
        group = _first_group(linked, n, size)
        full = group is not None
        group = group or _first_group(p2p, n, size)
        if group is None:
            break  # no group of this size, so none larger either
        found.append({"ranks": size, "gpus": group, "full_nvlink": full,
                      "compute_capability": _compute_capability(gpus, group)})
    return found


def sample_sizes(max_bytes):
    """16 bytes, doubling, up to NCCL_CAR_MAX_BYTES (which is included)."""
    sizes = []
    size = SMALLEST_SAMPLE
    while size < max_bytes:
        sizes.append(size)
        size *= 2
    return sizes + [max_bytes]


def _links(gpus):
    n = len(gpus["gpus"])
    p2p, nvlink = gpus["p2p"], gpus["nvlink"]
    pairs = list(itertools.combinations(range(n), 2))
    all_p2p = _connected(p2p, range(n))
    if nvlink is not None:
        if all_p2p and _connected(nvlink, range(n)):
            return "full NVLink"
        if any(nvlink[i][j] and nvlink[j][i] and p2p[i][j] and p2p[j][i] for i, j in pairs):
            return "NVLink between some of them"
    if all_p2p:
        return "NVLink unknown" if nvlink is None else "P2P without full NVLink"
    return "P2P between some pairs only"


def _outcome(decision):
    return decision["algorithm"] if decision["ours"] else f"NCCL ({decision['reason']})"


def ranges_text(decisions):
    """"1shot 16 B..256 KiB, 2shot 512 KiB..8 MiB": runs of equal outcome over the samples."""
    runs = []
    for decision in decisions:
        if runs and runs[-1][0] == _outcome(decision):
            runs[-1][2] = decision["bytes"]
        else:
            runs.append([_outcome(decision), decision["bytes"], decision["bytes"]])
    return ", ".join(f"{label} {format_size(first)}" + (f"..{format_size(last)}" if last != first else "")
                     for label, first, last in runs)


def communicator_line(candidate):
    links = "NVLink" if candidate["full_nvlink"] else "P2P, no NVLink"
    cc = candidate["compute_capability"]
    gpu = f"sm_{cc}" if cc else "mixed GPUs"
    return (f"    {candidate['ranks']} ranks on GPUs {','.join(map(str, candidate['gpus']))} "
            f"({links}, {gpu}): {ranges_text(candidate['decisions'])}")


def _taken(candidate):
    return any(decision["ours"] for decision in candidate["decisions"])


def summarise(gpus, candidates):
    """(verdict line, whether any all-reduce would be accelerated) from the library's
    decisions on each candidate communicator."""
    n = len(gpus["gpus"])
    links = _links(gpus)
    taken = [candidate for candidate in candidates if _taken(candidate)]
    if not taken:
        reasons = sorted({d["reason"] for candidate in candidates for d in candidate["decisions"]})
        if reasons == ["disabled"]:
            return "verdict: NCCL_CAR_DISABLE is set: the library would forward every call to NCCL", False
        tune = "; over PCIe, `nccl-car tune` measures this machine first" if "untuned" in reasons else ""
        return (f"verdict: {n} GPUs, {links}: the library would forward every all-reduce to NCCL "
                f"({', '.join(reasons)}){tune}"), False
    largest = max(d["bytes"] for candidate in taken for d in candidate["decisions"] if d["ours"])
    ranks = [candidate["ranks"] for candidate in taken]
    most = max(ranks)
    if ranks == list(range(2, most + 1)):
        between = "2 ranks" if most == 2 else f"2..{most} ranks"
    else:
        between = ", ".join(map(str, ranks)) + " ranks"
    forwarded = [candidate["ranks"] for candidate in candidates if not _taken(candidate)]
    if any(size < most for size in forwarded):
        beyond = "; other communicators are forwarded"
    elif forwarded or n > most:
        beyond = f"; communicators of more than {most} ranks are forwarded"
    else:
        beyond = ""
    return (f"verdict: {n} GPUs, {links}: all-reduces up to {format_size(largest)} between {between} "
            f"would be accelerated{beyond}"), True


def _collective_taken(policy, collective, answers):
    """What the policy takes of `collective` on every communicator of `answers` (each the
    query's taken[collective]), in its own words: "all-gather calls of int8, ...", "no
    all-gather calls"."""
    types = [t["name"] for t in policy["element_types"] if all(t["name"] in answer["types"] for answer in answers)]
    if any(answer["ops"] is None for answer in answers):   # a collective without an op
        return f"{collective} calls of {', '.join(types)}" if types else f"no {collective} calls"
    ops = [op for op in policy["ops"] if all(op in answer["ops"] for answer in answers)]
    if not (types and ops):
        return f"no {collective} calls"
    return f"{collective} calls of {', '.join(ops)} on {', '.join(types)}"


def _taken_note(policy, taken):
    """What the policy takes on every communicator it accelerates here, collective by
    collective, in its own names."""
    collectives = [_collective_taken(policy, collective, [candidate["taken"][collective] for candidate in taken])
                   for collective in policy["collectives"]]
    return (f"({SAMPLE_TYPE} sums at doubling sizes, as the library's policy decides them; with every rank on this "
            f"host it takes {'; '.join(collectives)}; other types may switch kernels, or go to NCCL, at other sizes)")


def judge(gpus, effective, query, env, table=None):
    """{"line", "accelerates" (None when not known), "communicators", "note"}: the verdict
    on this machine under `env`'s settings (`effective`, from library_query.effective_settings)
    and the choice table `table` ((path, fingerprint), None: the built-in rule)."""
    result = {"line": None, "accelerates": False, "communicators": [], "note": None}
    n = len(gpus["gpus"])
    if n == 0:
        result["line"] = "verdict: no GPU visible: the library would forward every call to NCCL"
        return result
    if n == 1:
        result["line"] = ("verdict: 1 GPU: communicators here have a single rank, and the library "
                          "forwards those to NCCL")
        return result
    if not effective["checked"]:
        result.update(line=f"verdict: not known: {effective['message']}", accelerates=None)
        return result
    try:
        policy = query.policy(env)
        candidates = candidate_communicators(gpus, policy["max_ranks"])
        if not candidates:
            result["line"] = (f"verdict: {n} GPUs without P2P access between them: the library would "
                              "forward every call to NCCL")
            return result
        sizes = sample_sizes(effective["values"]["NCCL_CAR_MAX_BYTES"])
        for candidate in candidates:
            answer = query.decide(env, candidate["ranks"], candidate["full_nvlink"], candidate["compute_capability"],
                                  sizes, SAMPLE_TYPE, table)
            candidate.update(decisions=answer["decisions"], taken=answer["taken"])
    except QueryUnavailable as error:
        result.update(line=f"verdict: not known: {error}", accelerates=None)
        return result
    result["line"], result["accelerates"] = summarise(gpus, candidates)
    result["communicators"] = candidates
    taken = [candidate for candidate in candidates if _taken(candidate)]
    if taken:
        result["note"] = _taken_note(policy, taken)
    return result


def _ranks_text(sizes):
    sizes = sorted(sizes)
    if len(sizes) > 1 and sizes == list(range(sizes[0], sizes[-1] + 1)):
        return f"{sizes[0]}..{sizes[-1]} ranks"
    return ", ".join(map(str, sizes)) + (" rank" if sizes == [1] else " ranks")


def machine_case(candidates, table_rows):
    """{"name", "line"}: which case the communicators of this machine are for the library, from
    the candidate communicators (their links) and the PCIe rows of the choice table it follows
    (`table_rows`, as library_query.applicable_table lists them): NVLink, with the built-in rule;
    PCIe, tuned (rows of the table measured that world size over PCIe) or untuned (every call to
    NCCL until `nccl-car tune` has measured it); or both. None without a candidate."""
    if not candidates:
        return None
    nvlink = [c["ranks"] for c in candidates if c["full_nvlink"]]
    measured = {row["ranks"] for row in table_rows if row.get("links") == "pcie"}
    tuned = [c["ranks"] for c in candidates if not c["full_nvlink"] and c["ranks"] in measured]
    untuned = [c["ranks"] for c in candidates if not c["full_nvlink"] and c["ranks"] not in measured]
    parts = []
    if nvlink:
        parts.append(f"NVLink for {_ranks_text(nvlink)} (the built-in rule, or the table's NVLink rows)")
    if tuned:
        parts.append(f"PCIe, tuned, for {_ranks_text(tuned)} (the table's PCIe rows decide; sizes they do not "
                     "cover go to NCCL)")
    if untuned:
        parts.append(f"PCIe, untuned, for {_ranks_text(untuned)}: every call goes to NCCL until `nccl-car tune` has "
                     "measured this machine (over PCIe the library takes only what that measured)")
    name = "+".join(label for label, present in (("nvlink", nvlink), ("pcie-tuned", tuned), ("pcie-untuned", untuned))
                    if present)
    return {"name": name, "line": "case:      " + "; ".join(parts)}


def table_line(table, effective=None):
    """The report's line on the choice table (library_query.applicable_table's answer), under
    the settings the library would run with (`effective`, None when not known): a kernel
    forced by NCCL_CAR_ALGO takes the all-reduces from the table (policy.cc, planCall)."""
    if not table["used"]:
        return f"table:     {table['why']}"
    line = f"table:     {table['path']} ({table['rows']} rows, digest {table['digest']}): the library follows it"
    forced = (effective or {}).get("NCCL_CAR_ALGO")
    if forced and forced != "auto":
        return (f"{line} for the all-gathers and reduce-scatters; NCCL_CAR_ALGO={forced} chooses every all-reduce's "
                "kernel instead; the verdict below does the same")
    return f"{line}; the verdict below does"


def routes_report(library_path, command):
    """What decides the mode of `nccl-car run`: the audit module and the front beside the
    library, the known packages this Python has, and the mode for `command` if given."""
    audit = paths.audit_module_for(library_path)
    front = paths.companion(library_path, "front")
    packages = routes.installed_packages(importlib.util.find_spec, importlib.metadata.version)
    chosen = routes.choose(command) if command else None
    return {"audit_module": {"path": audit, "exists": os.path.isfile(audit)},
            "front": {"path": front, "exists": os.path.isfile(front)},
            "packages": [{"name": name, "version": version, "nccl": kind} for name, version, kind in packages],
            "command": {"words": command, "mode": chosen[0], "why": chosen[1]} if chosen else None}


def collect(args, env):
    library_path, source = paths.library_location(args.lib, env)
    command = getattr(args, "command", None) or []
    command = command[1:] if command[:1] == ["--"] else command
    query, unavailable = library_query.find(env, library_path)
    effective = library_query.effective_settings(env, query, unavailable)
    gpus = gpu_probe.probe_gpus()
    nccl = host_probe.locate_nccl(env, sys.path, exclude=library_path)
    table = library_query.applicable_table(env, query, host_probe.encode_version(nccl["version"]),
                                           bool(gpus["gpus"]))
    judged = judge(gpus, effective, query, env, table["decide"])
    case = machine_case(judged["communicators"], table["table_rows"])
    return {
        "library": {"path": library_path, "source": source, "exists": os.path.isfile(library_path),
                    "nccl_h": host_probe.header_version_of(library_path)},
        "cuda": gpus,
        "nccl": nccl,
        "choice_table": {name: table[name] for name in ("path", "used", "why", "rows", "digest")},
        "routes": routes_report(library_path, command),
        "mps": host_probe.mps_status(env),
        "ipc": host_probe.ipc_facts(env),
        "settings": {"variables": library_query.library_variables(env),
                     "checked_by": query.path if query else None,
                     "not_checked": effective["message"],
                     "effective": effective["values"],
                     "problems": effective["problems"]},
        "case": case,
        "verdict": judged["line"],
        "accelerates": judged["accelerates"],
        "communicators": judged["communicators"],
        "verdict_note": judged["note"],
    }


def _matrix_lines(gpus):
    n = len(gpus["gpus"])
    nvlink = gpus["nvlink"]
    legend = "P = P2P access, N = NVLink" + ("" if nvlink is not None else
                                             f" (unknown: {gpus['nvlink_error']})")
    lines = [f"links:     {legend}", "      " + "".join(f"{j:>4}" for j in range(n))]
    for i in range(n):
        cells = []
        for j in range(n):
            if i == j:
                cells.append("   .")
                continue
            mark = ("P" if gpus["p2p"][i][j] else "") + ("N" if nvlink and nvlink[i][j] else "")
            cells.append(f"{mark or '-':>4}")
        lines.append(f"    {i:>2}" + "".join(cells))
    return lines


def _routes_lines(found):
    audit, front = found["audit_module"], found["front"]
    missing = "NOT FOUND, build it with scripts/build.sh"
    lines = [f"modes:     preload (LD_PRELOAD) for programs linked against libnccl.so.2; for programs that "
             f"load NCCL themselves, audit (LD_AUDIT={audit['path']}: {'found' if audit['exists'] else missing}) "
             f"or dropin (a folder nccl-car dropin makes), both through the front {front['path']} "
             f"({'found' if front['exists'] else missing})"]
    for package in found["packages"]:
        version = f" {package['version']}" if package["version"] else ""
        if package["nccl"] == "loads":
            lines.append(f"    {package['name']}{version} is installed: it loads NCCL itself, so its programs need "
                         "--mode audit (auto picks it for scripts that import it)")
        else:
            lines.append(f"    {package['name']}{version} is installed: it links NCCL; LD_PRELOAD reaches it "
                         "(--mode preload)")
    command = found["command"]
    if command:
        lines.append(f"command:   nccl-car run would use --mode {command['mode']}: {command['why']}")
    return lines


def render_text(report):
    ours = report["library"]
    state = "found" if ours["exists"] else (
        "NOT FOUND: build it with scripts/build.sh, or give --lib / NCCL_CAR_LIB")
    lines = [f"library:   {ours['path']} ({ours['source']}): {state}"]

    gpus = report["cuda"]
    if gpus["driver_error"]:
        lines.append(f"GPUs:      none visible ({gpus['driver_error']})")
    else:
        lines.append(f"GPUs:      {len(gpus['gpus'])} visible, CUDA driver {gpus['driver_version']}")
        for gpu in gpus["gpus"]:
            lines.append(f"    {gpu['index']:>2}  {gpu['name']}  {gpu['pci_bus_id']}  "
                         f"compute {gpu['compute_capability']}  {format_size(gpu['memory_bytes'])}")
        if len(gpus["gpus"]) > 1:
            lines.extend(_matrix_lines(gpus))

    nccl = report["nccl"]
    header = ours["nccl_h"]
    if nccl["path"]:
        version = nccl["version"] or f"unknown ({nccl['error']})"
        built = f"; libnccl-car.so built against nccl.h {header}" if header else ""
        lines.append(f"NCCL:      {nccl['path']} (via {nccl['source']}), version {version}{built}")
        lines.append("    (a program that loads its own NCCL, as PyTorch does, is forwarded to that one)")
        note = host_probe.header_note(nccl["version"], header)
        if note:
            lines.append(f"    {note[0]}: {note[1]}")
    else:
        lines.append(f"NCCL:      none found ({nccl['error']})")
    for attempt in nccl["tried"]:
        if attempt["error"]:
            lines.append(f"    tried {attempt['target']} ({attempt['source']}): {attempt['error']}")

    lines.extend(_routes_lines(report["routes"]))

    mps = report["mps"]
    lines.append(f"MPS:       {'running' if mps['running'] else 'not running'} ({mps['evidence']})")

    ipc = report["ipc"]
    namespace = ipc["ipc_namespace"] or "unknown"
    if ipc["host_ipc_namespace"] is not None:
        namespace += " (the host's)" if ipc["host_ipc_namespace"] else (
            " (not the host's: ranks must share this IPC namespace)")
    shm = format_size(ipc["dev_shm_bytes"]) if ipc["dev_shm_bytes"] is not None else "unknown"
    lines.append(f"IPC:       namespace {namespace}; container: "
                 f"{ipc['container'] or 'no sign of one'}; /dev/shm {shm}; open files "
                 f"{ipc['open_files_soft']} (hard {ipc['open_files_hard']})")

    variables = report["settings"]["variables"]
    if variables:
        lines.append("settings:  " + " ".join(f"{name}={value}" for name, value in variables.items()))
    else:
        lines.append("settings:  no NCCL_CAR_* variable set: the library's defaults apply")
    lines.extend(f"    problem: {problem}" for problem in report["settings"]["problems"])
    if report["settings"]["not_checked"]:
        lines.append(f"    values not checked: {report['settings']['not_checked']}")

    if report["case"]:
        lines.append(report["case"]["line"])
    lines.append(table_line(report["choice_table"], report["settings"]["effective"]))
    lines.append(report["verdict"])
    if report["accelerates"]:
        lines.extend(communicator_line(candidate) for candidate in report["communicators"])
    if report["verdict_note"]:
        lines.append(f"    {report['verdict_note']}")
    return "\n".join(lines)


def execute(args):
    report = collect(args, os.environ)
    print(json.dumps(report, indent=2) if args.json else render_text(report))
    return EXIT_OK
