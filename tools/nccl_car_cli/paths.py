"""Where the tool, its repository and the library are; how LD_PRELOAD names the library;
what the build or the install puts beside it (the audit module, the front, the query
program, the benchmark)."""

import os
import re


LIBRARY_NAME = "libnccl-car.so"
# The front's two dependencies, as shim/CMakeLists.txt names them (tests/cli/test_install_paths.py
# reads them off the built front): the library, then the real NCCL under a private name.
FRONT_OUR_LIBRARY = LIBRARY_NAME
FRONT_REAL_NCCL = "libnccl-car-real.so.2"
# realpath: a symlink to tools/nccl-car placed on PATH still finds the repository.
PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
TOOLS_DIR = os.path.dirname(PACKAGE_DIR)
REPO_ROOT = os.path.dirname(TOOLS_DIR)
BUILD_LIBRARY = os.path.join(REPO_ROOT, "build", "shim", LIBRARY_NAME)

# Where cmake/install.cmake puts the library, seen from this package as it installs it: a
# wheel's package is the install prefix itself (P/lib/); `cmake --install` puts the package
# in P/lib/nccl-car/python/nccl_car_cli.
_INSTALLED_FROM_PACKAGE = (os.path.join("lib", LIBRARY_NAME), os.path.join("..", "..", "..", LIBRARY_NAME))

# What sits beside a library, from its folder: first where the build puts it (build/shim/),
# then where the install does (P/lib/, with P/bin/ beside it).
_COMPANIONS = {
    "audit": ("libnccl-car-audit.so",),
    "front": (os.path.join("nccl-car", "front", "libnccl.so.2"),),
    "query": (os.path.join("..", "tools", "nccl_car_query"), os.path.join("..", "bin", "nccl_car_query")),
    "bench": (os.path.join("..", "tests", "car_nccl_bench"), os.path.join("..", "bin", "car_nccl_bench")),
}


def installed_library():
    """The library installed with this copy of the tool (a wheel, or cmake --install), or
    None when the tool runs from the repository."""
    for relative in _INSTALLED_FROM_PACKAGE:
        path = os.path.normpath(os.path.join(PACKAGE_DIR, relative))
        if os.path.isfile(path):
            return path
    return None


DEFAULT_LIBRARY = installed_library() or BUILD_LIBRARY
# For the options' help: "default: $NCCL_CAR_LIB, else <this>".
DEFAULT_LIBRARY_HELP = (DEFAULT_LIBRARY if DEFAULT_LIBRARY != BUILD_LIBRARY
                        else "build/shim/libnccl-car.so in this repository")


def library_location(option, env):
    """(path, how it was chosen): --lib, then NCCL_CAR_LIB, then the library installed with
    this tool, then the build folder."""
    if option:
        return os.path.abspath(option), "--lib"
    if env.get("NCCL_CAR_LIB"):
        return os.path.abspath(env["NCCL_CAR_LIB"]), "NCCL_CAR_LIB"
    if DEFAULT_LIBRARY != BUILD_LIBRARY:
        return DEFAULT_LIBRARY, "installed"
    return DEFAULT_LIBRARY, "default"


def companion(library, name):
    """The file `name` (audit, front, query, bench) beside `library`: the first of the build's
    and the install's places that exists, else where it would be for this kind of folder."""
    folder = os.path.dirname(library)
    places = [os.path.normpath(os.path.join(folder, relative)) for relative in _COMPANIONS[name]]
    for place in places:
        if os.path.exists(place):
            return place
    return places[0] if os.path.basename(folder) == "shim" else places[-1]


def is_shared_library(path):
    """Whether `path` is an ELF shared object (e_type ET_DYN), as libnccl-car.so is."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(18)
    except OSError:
        return False
    return len(head) == 18 and head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 3


def library_missing_message(path, source):
    return (f"the nccl-car library is not at {path} (from {source}): build it with "
            f"scripts/build.sh, or name it with --lib PATH or NCCL_CAR_LIB")


def _preload_entries(value):
    # The loader accepts both colons and spaces between LD_PRELOAD entries.
    return [entry for entry in re.split(r"[:\s]+", value or "") if entry]


def _is_library(entry, library):
    return (os.path.basename(entry) == os.path.basename(library)
            or os.path.realpath(entry) == os.path.realpath(library))


def preload_with(value, library):
    """LD_PRELOAD with `library` first (so its ncclAllReduce wins) and not twice."""
    rest = [entry for entry in _preload_entries(value) if not _is_library(entry, library)]
    return ":".join([library] + rest)


def preload_without(value, library):
    """LD_PRELOAD with every copy of `library` taken out, for NCCL-only baselines."""
    return ":".join(entry for entry in _preload_entries(value) if not _is_library(entry, library))


def audit_module_for(library):
    """libnccl-car-audit.so, which the build and the install put beside libnccl-car.so."""
    return companion(library, "audit")


def loads_library(path, library):
    """Whether loading `path` loads `library`: it is that file (or a link to it), or a front
    of ours (or a drop-in folder's link to one), an empty library that needs it by name
    (shim/CMakeLists.txt)."""
    return (os.path.realpath(path) == os.path.realpath(library)
            or os.path.basename(library) in _needed_libraries(path))


def path_list_with(value, entry):
    """A colon-separated list (LD_AUDIT, LD_LIBRARY_PATH) with `entry` first and not twice."""
    rest = [item for item in (value or "").split(":") if item and item != entry]
    return ":".join([entry] + rest)


def _needed_libraries(path):
    from . import routes  # routes imports this module: looked up at call time
    return routes.needed_libraries(path)
