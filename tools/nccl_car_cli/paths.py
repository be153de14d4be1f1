"""Where the tool, its repository and the library are; how LD_PRELOAD names the library;
what the build puts beside it (the audit module, the drop-in folder)."""

import os
import re

# realpath: a symlink to tools/nccl-car placed on PATH still finds the repository.
TOOLS_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
REPO_ROOT = os.path.dirname(TOOLS_DIR)
DEFAULT_LIBRARY = os.path.join(REPO_ROOT, "build", "shim", "libnccl-car.so")


def library_location(option, env):
    """(path, how it was chosen): --lib, then NCCL_CAR_LIB, then the build folder."""
    if option:
        return os.path.abspath(option), "--lib"
    if env.get("NCCL_CAR_LIB"):
        return os.path.abspath(env["NCCL_CAR_LIB"]), "NCCL_CAR_LIB"
    return DEFAULT_LIBRARY, "default"


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
    """libnccl-car-audit.so, which the build puts beside libnccl-car.so."""
    return os.path.join(os.path.dirname(library), "libnccl-car-audit.so")


def dropin_folder_for(library):
    """The build's folder whose libnccl.so.2 is `library`, or None."""
    folder = os.path.join(os.path.dirname(library), "dropin")
    entry = os.path.join(folder, "libnccl.so.2")
    if os.path.exists(entry) and os.path.realpath(entry) == os.path.realpath(library):
        return folder
    return None


def path_list_with(value, entry):
    """A colon-separated list (LD_AUDIT, LD_LIBRARY_PATH) with `entry` first and not twice."""
    rest = [item for item in (value or "").split(":") if item and item != entry]
    return ":".join([entry] + rest)
