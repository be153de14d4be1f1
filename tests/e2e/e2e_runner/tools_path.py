"""Makes the command-line tool's package (tools/nccl_car_cli) importable: the runner reads
the library's log and nccl-tests' output with the tool's own parsers."""

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TOOLS_DIR = os.path.join(REPO_ROOT, "tools")
NCCL_CAR_TOOL = os.path.join(TOOLS_DIR, "nccl-car")

if TOOLS_DIR not in sys.path:
    sys.path.insert(0, TOOLS_DIR)
