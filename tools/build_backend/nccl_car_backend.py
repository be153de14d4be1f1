"""The wheel's build backend (pyproject.toml): scikit-build-core, which also needs NCCL's
headers. Where neither NCCL_HOME, the CUDA folder nor /usr has include/nccl.h, it asks pip
for NCCL's own package from PyPI (nvidia-nccl-cu12 or -cu13, as the CUDA toolkit's major
version) and points the build at it, as scripts/setup.sh does for the scripts."""

import importlib.util
import os
import re
import subprocess

from scikit_build_core import build as _scikit_build
from scikit_build_core.build import *  # noqa: F401,F403  (the hooks we leave as they are)


def _cuda_home():
    return os.environ.get("CUDA_HOME") or "/usr/local/cuda"


def _has_nccl_header():
    return any(folder and os.path.isfile(os.path.join(folder, "include", "nccl.h"))
               for folder in (os.environ.get("NCCL_HOME"), _cuda_home(), "/usr"))


def _nccl_package():
    try:
        version = subprocess.run([os.path.join(_cuda_home(), "bin", "nvcc"), "--version"],
                                 capture_output=True, text=True, check=False).stdout
    except OSError:
        version = ""
    major = re.search(r"release (\d+)\.", version)
    return f"nvidia-nccl-cu{major.group(1) if major else 13}"


def _point_at_nccl_package():
    """NCCL_HOME for CMake: the folder of the nvidia.nccl package pip installed for the build."""
    if _has_nccl_header():
        return
    spec = importlib.util.find_spec("nvidia.nccl")
    if spec is not None and spec.submodule_search_locations:
        os.environ["NCCL_HOME"] = list(spec.submodule_search_locations)[0]


def get_requires_for_build_wheel(config_settings=None):
    requires = list(_scikit_build.get_requires_for_build_wheel(config_settings))
    return requires if _has_nccl_header() else requires + [_nccl_package()]


def get_requires_for_build_editable(config_settings=None):
    requires = list(_scikit_build.get_requires_for_build_editable(config_settings))
    return requires if _has_nccl_header() else requires + [_nccl_package()]


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _point_at_nccl_package()
    return _scikit_build.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _point_at_nccl_package()
    return _scikit_build.build_editable(wheel_directory, config_settings, metadata_directory)
