"""nccl-car run: runs a command with the library loaded into it, then says what it did."""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

from . import dropin, library_query, options, paths, routes
from .errors import MissingPrerequisite, UsageError
from .logparse import LogTally

DESCRIPTION = """\
Runs COMMAND with libnccl-car.so loaded into it and the options below turned into the
library's NCCL_CAR_* variables. The command's stdout is passed through untouched and its
stderr as it comes; the library's log lines are read on the way, and a summary of the
calls taken and forwarded is printed to stderr at the end. NCCL_CAR_DEBUG is raised to
INFO at least, since the summary is built from INFO lines.

--mode says how the library gets in: preload (LD_PRELOAD: programs linked against
libnccl.so.2, such as PyTorch, CuPy, nccl-tests), audit (LD_AUDIT: programs that load NCCL
themselves, such as JAX, TensorFlow, XGBoost, ctypes bindings), dropin (a temporary drop-in
folder first on LD_LIBRARY_PATH, made for the real NCCL of --nccl-lib, else the one doctor
finds: see nccl-car dropin), or auto (the default): audit when the command shows a program
that loads NCCL itself, else preload.

exit codes: the command's own exit code (128+N when killed by signal N), 126 when the
command cannot be executed, 127 when it is not found; before the command starts,
2 for a usage error and 3 when the library is missing."""

EPILOG = """\
examples:
  nccl-car run --algo 2stage --max-bytes 4M -- torchrun --nproc-per-node 4 train.py
  nccl-car run -- python3 jax_program.py          (auto: audit, it imports jax)"""


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    options.add_library_option(parser, "to load")
    parser.add_argument("--mode", choices=routes.MODES, default="auto",
                        help="how the library gets into the program (default: auto)")
    # Values are checked by the library itself (library.refuse_ignored), not here.
    parser.add_argument("--algo", metavar="NAME",
                        help="auto or a kernel name -> NCCL_CAR_ALGO")
    parser.add_argument("--max-bytes", type=options.size, metavar="SIZE",
                        help="largest all-reduce taken, e.g. 8M or 512K (binary) -> NCCL_CAR_MAX_BYTES")
    parser.add_argument("--max-blocks", type=options.integer, metavar="N",
                        help="CUDA blocks per kernel -> NCCL_CAR_MAX_BLOCKS (the library states its range)")
    parser.add_argument("--disable", action="store_true",
                        help="forward every call to NCCL -> NCCL_CAR_DISABLE=1")
    parser.add_argument("--debug", metavar="LEVEL",
                        help="WARN, INFO or TRACE -> NCCL_CAR_DEBUG (WARN is raised to INFO)")
    parser.add_argument("--nccl-lib", metavar="PATH", type=options.existing_file("the path of the real libnccl.so.2"),
                        help="the real libnccl.so.2 to forward to -> NCCL_CAR_NCCL_LIB")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                        help="the program to run, after --")


def option_variables(args):
    """The library's variables the options set, as given (NCCL_CAR_DEBUG not yet raised)."""
    given = {"NCCL_CAR_ALGO": args.algo,
             "NCCL_CAR_MAX_BYTES": None if args.max_bytes is None else str(args.max_bytes),
             "NCCL_CAR_MAX_BLOCKS": None if args.max_blocks is None else str(args.max_blocks),
             "NCCL_CAR_DISABLE": "1" if args.disable else None,
             "NCCL_CAR_NCCL_LIB": os.path.abspath(args.nccl_lib) if args.nccl_lib else None,
             "NCCL_CAR_DEBUG": args.debug}
    return {name: value for name, value in given.items() if value is not None}


def child_environment(base, args, library, mode="preload", dropin_folder=None):
    env = routes.environment_for(base, mode, library, dropin_folder)
    env.update(option_variables(args))
    env["NCCL_CAR_DEBUG"] = library_query.at_least_info(env.get("NCCL_CAR_DEBUG"))
    return env


# A progress bar redraws with "\r" and may never end a line: cutting there too keeps the
# unfinished remainder short. No line of the library comes near the cap.
_LINE_END = re.compile(b"[\r\n]")
_LONGEST_PENDING = 1 << 16


def _pump_stderr(stream, tally):
    """Copies the child's stderr to ours chunk by chunk, so progress bars stay live, while
    cutting it into lines for the tally."""
    out = sys.stderr.buffer
    pending = b""
    while True:
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            break
        out.write(chunk)
        out.flush()
        *lines, pending = _LINE_END.split(pending + chunk)
        for line in lines:
            tally.feed(line.decode("utf-8", "replace"))
        if len(pending) > _LONGEST_PENDING:
            pending = b""
    if pending:
        tally.feed(pending.decode("utf-8", "replace"))


def _forward_signals(child):
    """Passes SIGTERM and SIGHUP on to the child so that the summary still gets printed.
    SIGINT is not forwarded: a Ctrl-C reaches the child from the terminal already; we
    only must not die of it. Returns the old handlers, for _restore_signals."""
    def forward(signum, _frame):
        child.send_signal(signum)

    old = {signum: signal.signal(signum, forward) for signum in (signal.SIGTERM, signal.SIGHUP)}
    old[signal.SIGINT] = signal.signal(signal.SIGINT, lambda _signum, _frame: None)
    return old


def _restore_signals(old):
    for signum, handler in old.items():
        signal.signal(signum, handler)


def _choose_mode(args, command):
    if args.mode != "auto":
        return args.mode
    mode, why = routes.choose(command)
    print(f"nccl-car run: mode {mode}: {why} (--mode chooses another)", file=sys.stderr)
    return mode


def unreached_lines(tally, mode):
    """When no communicator was set up through the library: say so, why that is likely, and
    which mode to try. Empty when one was."""
    if tally.setups > 0:
        return []
    if mode == "audit" and tally.audit_served == 0:
        return ["nccl-car: no communicator reached the library: the audit module (LD_AUDIT) saw no load of "
                "libnccl.so",
                "  likely cause: the program links NCCL statically, runs where LD_AUDIT is ignored (setuid, "
                "a libc other than glibc), or made no NCCL call",
                "  try: --mode preload (programs linked against libnccl.so.2) or --mode dropin (no LD_AUDIT)"]
    if tally.real_nccl_found > 0 or mode == "audit":
        return ["nccl-car: no communicator reached the library: NCCL calls reached it, but no communicator "
                "was created through it",
                "  likely cause: the program creates its communicators through a NCCL it loaded itself "
                "(dlopen), or made no collective call in this run",
                f"  try: --mode {'audit' if mode == 'preload' else 'preload'}"]
    if mode == "preload":
        return ["nccl-car: no communicator reached the library: it was preloaded, but no NCCL call reached it",
                "  likely cause: the program loads NCCL itself with dlopen and calls it through that handle "
                "(JAX/XLA, TensorFlow, XGBoost, ctypes bindings such as vLLM's PyNccl), which LD_PRELOAD "
                "does not reach; or it made no NCCL call",
                "  try: --mode audit"]
    return ["nccl-car: no communicator reached the library: its libnccl.so.2 was first on LD_LIBRARY_PATH, "
            "but no NCCL call reached it",
            "  likely cause: the program loads NCCL by path (JAX loads the NCCL wheel's copy), had loaded it "
            "already, or finds it through an RPATH, which comes before LD_LIBRARY_PATH",
            "  try: --mode audit"]


def execute(args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("no command given: nccl-car run [options] -- COMMAND ...")
    library, source = paths.library_location(args.lib, os.environ)
    note = library_query.refuse_ignored(option_variables(args), os.environ, library)
    if note:
        print(f"nccl-car run: {note}", file=sys.stderr)
    if not os.path.isfile(library):
        raise MissingPrerequisite(paths.library_missing_message(library, source))
    if not paths.is_shared_library(library):
        raise MissingPrerequisite(f"{library} (from {source}) is not a shared library: it takes libnccl-car.so; "
                                  "nothing was run")
    mode = _choose_mode(args, command)
    if mode == "audit" and not os.path.isfile(paths.audit_module_for(library)):
        raise MissingPrerequisite(f"--mode audit needs {paths.audit_module_for(library)} beside the library: "
                                  "build it with scripts/build.sh")
    if args.debug and args.debug.upper() == "WARN":
        print("nccl-car run: --debug WARN raised to INFO: the summary needs the INFO lines",
              file=sys.stderr)

    made = []
    try:
        folder = None
        if mode == "dropin":
            real, _how = dropin.real_nccl(args.nccl_lib, os.environ, library)
            folder = tempfile.mkdtemp(prefix="nccl-car-dropin-")
            made.append(folder)
            dropin.make(folder, library, real)
        env = child_environment(os.environ, args, library, mode, folder)
        return _run(command, env, mode)
    finally:
        for folder in made:
            shutil.rmtree(folder, ignore_errors=True)


def _run(command, env, mode):
    try:
        child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    except FileNotFoundError:
        print(f"nccl-car run: error: command not found: {command[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"nccl-car run: error: cannot execute: {command[0]}", file=sys.stderr)
        return 126

    old_handlers = _forward_signals(child)
    tally = LogTally()
    try:
        _pump_stderr(child.stderr, tally)
        returncode = child.wait()
    finally:
        _restore_signals(old_handlers)
    code = 128 - returncode if returncode < 0 else returncode
    how = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with {returncode}"
    print(f"nccl-car run: {command[0]} {how}", file=sys.stderr)
    disabled = library_query.library_disabled(env)
    unreached = [] if disabled else unreached_lines(tally, mode)
    # Silence says nothing more than the lines that explain it.
    summary = tally.summary_lines() if tally.library_lines or not unreached else []
    if disabled:
        summary = [f"nccl-car run: NCCL_CAR_DISABLE={env['NCCL_CAR_DISABLE']} (--disable, or the environment) "
                   "switched the library off: every NCCL call went to NCCL untouched, so nothing was set up "
                   "or counted below (leave it unset for the library to take calls)"] + summary
    for line in summary + unreached:
        print(line, file=sys.stderr)
    return code
