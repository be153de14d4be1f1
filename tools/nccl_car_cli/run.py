"""nccl-car run: runs a command with the library preloaded, then says what it did."""

import argparse
import os
import re
import signal
import subprocess
import sys

from . import options, paths, settings
from .errors import MissingPrerequisite, UsageError
from .logparse import LogTally

DESCRIPTION = """\
Runs COMMAND with libnccl-car.so preloaded (prepended to LD_PRELOAD) and the options
below turned into the library's NCCL_CAR_* variables. The command's stdout is passed
through untouched and its stderr as it comes; the library's log lines are read on the
way, and a summary of the calls taken and forwarded is printed to stderr at the end.
NCCL_CAR_DEBUG is raised to INFO at least, since the summary is built from INFO lines.

exit codes: the command's own exit code (128+N when killed by signal N), 126 when the
command cannot be executed, 127 when it is not found; before the command starts,
2 for a usage error and 3 when the library is missing."""

EPILOG = """\
example:
  nccl-car run --algo 2stage --max-bytes 4M -- torchrun --nproc-per-node 4 train.py"""


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--lib", metavar="PATH",
                        help="libnccl-car.so to preload (default: $NCCL_CAR_LIB, else "
                             "build/shim/libnccl-car.so in this repository)")
    parser.add_argument("--algo", choices=settings.ALGORITHMS,
                        help="kernel choice -> NCCL_CAR_ALGO")
    parser.add_argument("--max-bytes", type=options.library_max_bytes, metavar="SIZE",
                        help="largest all-reduce taken, e.g. 8M or 512K (binary), a "
                             "multiple of 16 up to 1G -> NCCL_CAR_MAX_BYTES")
    parser.add_argument("--max-blocks", type=options.int_between(1, settings.MAX_BLOCKS),
                        metavar="N", help=f"CUDA blocks per kernel, 1..{settings.MAX_BLOCKS} "
                                          "-> NCCL_CAR_MAX_BLOCKS")
    parser.add_argument("--disable", action="store_true",
                        help="forward every call to NCCL -> NCCL_CAR_DISABLE=1")
    parser.add_argument("--debug", type=options.debug_level, metavar="LEVEL",
                        help="WARN, INFO or TRACE -> NCCL_CAR_DEBUG (WARN is raised to INFO)")
    parser.add_argument("--nccl-lib", metavar="PATH",
                        help="the real libnccl.so.2 to forward to -> NCCL_CAR_NCCL_LIB")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                        help="the program to run, after --")


def child_environment(base, args, library):
    env = dict(base)
    env["LD_PRELOAD"] = paths.preload_with(base.get("LD_PRELOAD"), library)
    if args.algo:
        env["NCCL_CAR_ALGO"] = args.algo
    if args.max_bytes is not None:
        env["NCCL_CAR_MAX_BYTES"] = str(args.max_bytes)
    if args.max_blocks is not None:
        env["NCCL_CAR_MAX_BLOCKS"] = str(args.max_blocks)
    if args.disable:
        env["NCCL_CAR_DISABLE"] = "1"
    if args.nccl_lib:
        env["NCCL_CAR_NCCL_LIB"] = os.path.abspath(args.nccl_lib)
    env["NCCL_CAR_DEBUG"] = settings.at_least_info(args.debug or base.get("NCCL_CAR_DEBUG"))
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


def execute(args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("no command given: nccl-car run [options] -- COMMAND ...")
    library, source = paths.library_location(args.lib, os.environ)
    if not os.path.isfile(library):
        raise MissingPrerequisite(paths.library_missing_message(library, source))
    if args.debug == "WARN":
        print("nccl-car run: --debug WARN raised to INFO: the summary needs the INFO lines",
              file=sys.stderr)

    env = child_environment(os.environ, args, library)
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
    for line in tally.summary_lines():
        print(line, file=sys.stderr)
    return code
