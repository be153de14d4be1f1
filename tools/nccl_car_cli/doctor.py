"""nccl-car doctor: what this machine offers, and what the library would do here."""

import argparse
import importlib.metadata
import importlib.util
import json
import os
import sys

from . import gpu_probe, host_probe, library_query, machine_verdict, nccl_probe, paths, routes, settings
from .errors import EXIT_OK
from .units import format_size

DESCRIPTION = """\
Reports the GPUs (name, PCI bus id), P2P access and NVLink between each pair, the
libnccl.so.2 the library would forward to and its version beside the nccl.h the library
was built against (a warning when the real one is newer), whether MPS runs, IPC facts,
where libnccl-car.so and its audit module are, the Python packages here that load NCCL
themselves or link it (and so which --mode of `nccl-car run` they need), the NCCL_CAR_*
variables set, and a verdict: which all-reduces the library would run on its own kernels
here. With `-- COMMAND ...` it also says which mode that command needs. Works without a
GPU or driver.

exit codes: 0 the report was printed (whatever it says: read the verdict or --json),
2 usage error."""


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--lib", metavar="PATH",
                        help="libnccl-car.so to look for (default: $NCCL_CAR_LIB, else "
                             "build/shim/libnccl-car.so in this repository)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                        help="a program to say the mode for, after --")


def routes_report(library, command):
    """What decides the mode of `nccl-car run`: the audit module and drop-in folder beside
    the library, the known packages this Python has, and the mode for `command` if given."""
    audit = paths.audit_module_for(library)
    packages = routes.installed_packages(importlib.util.find_spec, importlib.metadata.version)
    chosen = routes.choose(command) if command else None
    return {"audit_module": {"path": audit, "exists": os.path.isfile(audit)},
            "dropin_folder": paths.dropin_folder_for(library),
            "packages": [{"name": name, "version": version, "nccl": kind} for name, version, kind in packages],
            "command": {"words": command, "mode": chosen[0], "why": chosen[1]} if chosen else None}


def collect(args, env):
    library, source = paths.library_location(args.lib, env)
    command = getattr(args, "command", None) or []
    command = command[1:] if command[:1] == ["--"] else command
    query, unavailable = library_query.find(env, library)
    effective = settings.effective_settings(env, query, unavailable)
    gpus = gpu_probe.probe_gpus()
    judged = machine_verdict.judge(gpus, effective, query, env)
    return {
        "library": {"path": library, "source": source, "exists": os.path.isfile(library),
                    "nccl_h": nccl_probe.header_version_of(library)},
        "cuda": gpus,
        "nccl": nccl_probe.locate(env, sys.path, exclude=library),
        "routes": routes_report(library, command),
        "mps": host_probe.mps_status(env),
        "ipc": host_probe.ipc_facts(env),
        "settings": {"variables": settings.library_variables(env),
                     "checked_by": query.path if query else None,
                     "not_checked": effective["message"],
                     "effective": effective["values"],
                     "problems": effective["problems"]},
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
    audit = found["audit_module"]
    dropin = found["dropin_folder"] or "none (nccl-car run --mode dropin makes a temporary one)"
    lines = [f"modes:     preload (LD_PRELOAD) for programs linked against libnccl.so.2; for programs that "
             f"load NCCL themselves, audit (LD_AUDIT={audit['path']}: "
             f"{'found' if audit['exists'] else 'NOT FOUND, build it with scripts/build.sh'}) or dropin "
             f"(folder {dropin})"]
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
    library = report["library"]
    state = "found" if library["exists"] else (
        "NOT FOUND: build it with scripts/build.sh, or give --lib / NCCL_CAR_LIB")
    lines = [f"library:   {library['path']} ({library['source']}): {state}"]

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
    header = library["nccl_h"]
    if nccl["path"]:
        version = nccl["version"] or f"unknown ({nccl['error']})"
        built = f"; libnccl-car.so built against nccl.h {header}" if header else ""
        lines.append(f"NCCL:      {nccl['path']} (via {nccl['source']}), version {version}{built}")
        lines.append("    (a program that loads its own NCCL, as PyTorch does, is forwarded to that one)")
        note = nccl_probe.header_note(nccl["version"], header)
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

    lines.append(report["verdict"])
    if report["accelerates"]:
        lines.extend(machine_verdict.communicator_line(candidate) for candidate in report["communicators"])
    if report["verdict_note"]:
        lines.append(f"    {report['verdict_note']}")
    return "\n".join(lines)


def execute(args):
    report = collect(args, os.environ)
    print(json.dumps(report, indent=2) if args.json else render_text(report))
    return EXIT_OK
