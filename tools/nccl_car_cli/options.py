"""argparse types shared by the subcommands: they turn a bad value into a usage error."""

import argparse
import os
import shlex

from . import paths
from .units import parse_size


def size(text):
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def positive_size(text):
    value = size(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"invalid size '{text}': must be at least 1 byte")
    return value


def int_between(low, high):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid number '{text}'") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range: expected {low} to {high}")
        return value
    return parse


def positive_int(text):
    return int_between(1, 1 << 31)(text)


def integer(text):
    """Any whole number: for an option whose range is the library's, which checks it
    (library_query.refuse_ignored) and states it once."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number '{text}'") from None


def existing_file(what):
    """A path that must name a file, `what` saying what it takes."""
    def parse(text):
        if not os.path.isfile(text):
            raise argparse.ArgumentTypeError(f"{text}: no such file (it takes {what}); nothing was run")
        return text
    return parse


def words(text):
    """Shell-style splitting, so that quoted arguments survive: "-x 'a b'"."""
    try:
        return shlex.split(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"cannot split '{text}': {error}") from None


def command_words(text):
    split = words(text)
    if not split:
        raise argparse.ArgumentTypeError("empty command")
    return split


def add_library_option(parser, what):
    """The --lib option every subcommand that uses the library takes, `what` saying for what
    (the default follows paths.library_location)."""
    parser.add_argument("--lib", metavar="PATH",
                        help=f"libnccl-car.so {what} (default: $NCCL_CAR_LIB, else {paths.DEFAULT_LIBRARY_HELP})")
