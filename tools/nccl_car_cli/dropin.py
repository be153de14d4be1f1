"""nccl-car dropin: makes a drop-in folder, for programs that load NCCL by name where LD_AUDIT
cannot be used. `nccl-car run --mode dropin` makes one for each run, in a temporary folder.

A drop-in folder holds three links (docs/design.md, "Three ways in"):

  libnccl.so.2           the front: an empty libnccl.so.2 that needs the two below
  libnccl-car.so         the library, whose hooks come first
  libnccl-car-real.so.2  the real NCCL, whose every other function comes after them

First on LD_LIBRARY_PATH, its libnccl.so.2 is what a program that asks for NCCL by name
gets. It is made for one real NCCL: the one named, else the one `doctor` finds (Python
wheels included), and serves programs of that NCCL."""

import argparse
import os
import sys

from . import host_probe, options, paths
from .errors import MissingPrerequisite, UsageError

DESCRIPTION = __doc__.split("\n\n", 1)[1]

EPILOG = """\
examples:
  nccl-car dropin /opt/nccl-car-dropin
  export LD_LIBRARY_PATH=/opt/nccl-car-dropin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

exit codes: 0 made, 2 usage error (FOLDER holds other files, --nccl-lib names no file), 3
missing prerequisite (the library, its front, or the real NCCL)."""

# The names the front asks for (shim/CMakeLists.txt sets them; tests/cli/test_install_paths.py
# reads them off the built front).
FRONT_NAME = "libnccl.so.2"


def add_arguments(parser):
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    options.add_library_option(parser, "to link")
    parser.add_argument("--nccl-lib", metavar="PATH", type=options.existing_file("the path of the real libnccl.so.2"),
                        help="the real libnccl.so.2 behind it (default: $NCCL_CAR_NCCL_LIB, else the one "
                             "nccl-car doctor finds)")
    parser.add_argument("folder", metavar="FOLDER", help="the folder to make (new, empty, or a drop-in folder)")


def real_nccl(option, env, library):
    """(path, how it was chosen) of the real libnccl.so.2 for a drop-in folder. Raises when the
    one named is no file, or none is found."""
    named = option or env.get("NCCL_CAR_NCCL_LIB")
    if named:
        source = "--nccl-lib" if option else "NCCL_CAR_NCCL_LIB"
        if not os.path.isfile(named):
            raise MissingPrerequisite(f"{source} {named}: no such file (it takes the path of the real "
                                      "libnccl.so.2); nothing was made or run")
        return os.path.abspath(named), source
    found = host_probe.locate_nccl(env, sys.path, exclude=library)
    if not found["path"] or not os.path.isabs(found["path"]):
        raise MissingPrerequisite("no real libnccl.so.2 found for the drop-in folder (nccl-car doctor says where "
                                  "it looked); name it with --nccl-lib PATH")
    return found["path"], found["source"]


def front_of(library):
    """The front beside the library (the build's or the install's), which must exist."""
    front = paths.companion(library, "front")
    if not os.path.isfile(front):
        raise MissingPrerequisite(f"the front {front} is missing beside {library}: build it with scripts/build.sh")
    return front


def make(folder, library, real):
    """Makes `folder` a drop-in folder of `library` in front of `real` (both files). An
    existing folder must be empty or hold only these links; they are replaced."""
    links = {FRONT_NAME: front_of(library), paths.FRONT_OUR_LIBRARY: library, paths.FRONT_REAL_NCCL: real}
    os.makedirs(folder, exist_ok=True)
    strangers = sorted(set(os.listdir(folder)) - set(links))
    if strangers:
        raise UsageError(f"{folder} holds other files ({', '.join(strangers[:3])}): give a new or empty folder")
    for name, target in links.items():
        link = os.path.join(folder, name)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.realpath(target), link)
    return links


def execute(args):
    library, source = paths.library_location(args.lib, os.environ)
    if not os.path.isfile(library):
        raise MissingPrerequisite(paths.library_missing_message(library, source))
    real, how = real_nccl(args.nccl_lib, os.environ, library)
    folder = os.path.abspath(args.folder)
    make(folder, library, real)
    print(f"nccl-car dropin: {folder}: libnccl.so.2 is nccl-car ({library}) in front of {real} ({how})")
    print(f"  use it: export LD_LIBRARY_PATH={folder}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}")
    return 0
