#!/usr/bin/env python3
"""The end-to-end runs (tests/README.md): `run_e2e.py --list`, `run_e2e.py NAME...`.
ctest runs each scenario as its own test (labels e2e, gpu, multi-gpu)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from e2e_runner.main import main  # noqa: E402  (needs the path above)

sys.exit(main())
