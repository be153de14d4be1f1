"""Where a build of this repository keeps what the runs load and start."""

import os


class Build:
    def __init__(self, folder):
        self.folder = os.path.abspath(folder)

    @property
    def library(self):
        return os.path.join(self.folder, "shim", "libnccl-car.so")

    @property
    def audit_module(self):
        return os.path.join(self.folder, "shim", "libnccl-car-audit.so")

    @property
    def query(self):
        """nccl_car_query, the library's answers (tools/query/), built into tools/."""
        return os.path.join(self.folder, "tools", "nccl_car_query")

    def program(self, name):
        """One of the end-to-end programs (tests/e2e/*.cc), built into tests/."""
        return os.path.join(self.folder, "tests", name)
