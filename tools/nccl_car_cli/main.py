"""nccl-car's command line: one subcommand per module, errors turned into exit codes."""

import argparse
import sys

from . import bench, doctor, dropin, run, tune
from .errors import EXIT_USAGE, CliError, UsageError

SUBCOMMANDS = {
    "doctor": (doctor, "what this machine offers and what the library would do here"),
    "run": (run, "run a command with the library loaded, then summarise what it did"),
    "dropin": (dropin, "make a drop-in folder: a libnccl.so.2 that puts the library in front of the real NCCL"),
    "bench": (bench, "nccl-car against NCCL's best configuration, side by side"),
    "tune": (tune, "measure this machine and write the choice table the library follows"),
}

DESCRIPTION = """\
libnccl-car.so runs small all-reduces, all-gathers and reduce-scatters between the GPUs of
one machine on its own CUDA kernels and forwards every other NCCL call to NCCL; this tool
checks the machine, runs programs with the library and measures it. See docs/cli.md.

exit codes: 0 ok, 1 the check or a run failed, 2 usage error, 3 missing prerequisite
(the library, the benchmark program, GPUs); `run` passes on its command's exit code."""


def build_parser():
    parser = argparse.ArgumentParser(prog="nccl-car", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
    for name, (module, summary) in SUBCOMMANDS.items():
        module.add_arguments(commands.add_parser(name, help=summary))
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.subcommand is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    module, _summary = SUBCOMMANDS[args.subcommand]
    try:
        return module.execute(args)
    except CliError as error:
        hint = f" (see nccl-car {args.subcommand} --help)" if isinstance(error, UsageError) else ""
        print(f"nccl-car {args.subcommand}: error: {error}{hint}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(f"nccl-car {args.subcommand}: interrupted", file=sys.stderr)
        return 130
