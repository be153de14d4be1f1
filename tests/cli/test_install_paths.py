"""Which library the tool takes, and what it finds beside it, in the three layouts
(docs/cli.md, "Where the library is"): this repository's build, `cmake --install --prefix P`
and the wheel. The tool's package is copied into each layout as cmake/install.cmake puts it;
tests/install/run-install-tests.sh checks the real installs."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from cli_support import BUILD_DIR, TOOLS_DIR, require_built

ASK = ("import json, sys; from nccl_car_cli import paths; library = paths.library_location(None, {})[0]; "
       "print(json.dumps({'library': paths.library_location(None, {}), 'audit': paths.audit_module_for(library), "
       "'front': paths.companion(library, 'front'), 'query': paths.companion(library, 'query'), "
       "'bench': paths.companion(library, 'bench')}))")
FRONT = os.path.join(BUILD_DIR, "shim", "nccl-car", "front", "libnccl.so.2")


def touch(path, source=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if source:
        shutil.copy(source, path)
    else:
        open(path, "w").close()


class InstallLayouts(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="nccl-car-layout-")
        self.addCleanup(shutil.rmtree, self.folder)

    def install(self, package_dir, prefix):
        """The package at `package_dir`, the installed files under `prefix`; what it answers."""
        shutil.copytree(os.path.join(TOOLS_DIR, "nccl_car_cli"), package_dir,
                        ignore=shutil.ignore_patterns("__pycache__"))
        for file in ("lib/libnccl-car.so", "lib/libnccl-car-audit.so", "bin/nccl_car_query", "bin/car_nccl_bench",
                     "lib/nccl-car/front/libnccl.so.2"):
            touch(os.path.join(prefix, file))
        answer = subprocess.run([sys.executable, "-c", ASK], cwd="/", capture_output=True, text=True,
                                env={"PATH": os.environ.get("PATH", ""),
                                     "PYTHONPATH": os.path.dirname(package_dir)}, check=True)
        return json.loads(answer.stdout)

    def check(self, answer, prefix):
        self.assertEqual(answer["library"], [os.path.join(prefix, "lib", "libnccl-car.so"), "installed"])
        self.assertEqual(answer["audit"], os.path.join(prefix, "lib", "libnccl-car-audit.so"))
        self.assertEqual(answer["query"], os.path.join(prefix, "bin", "nccl_car_query"))
        self.assertEqual(answer["bench"], os.path.join(prefix, "bin", "car_nccl_bench"))
        self.assertEqual(answer["front"], os.path.join(prefix, "lib", "nccl-car", "front", "libnccl.so.2"))

    def test_cmake_install(self):
        prefix = os.path.join(self.folder, "prefix")
        self.check(self.install(os.path.join(prefix, "lib", "nccl-car", "python", "nccl_car_cli"), prefix), prefix)

    def test_wheel(self):
        package = os.path.join(self.folder, "site-packages", "nccl_car_cli")
        self.check(self.install(package, package), package)

    def test_repository_build(self):
        """From the repository, the build's layout: build/tools/, build/tests/, build/shim/nccl-car/front."""
        build = os.path.join(self.folder, "build")
        library = os.path.join(build, "shim", "libnccl-car.so")
        for file in ("shim/libnccl-car.so", "tools/nccl_car_query", "tests/car_nccl_bench"):
            touch(os.path.join(build, file))
        sys.path.insert(0, TOOLS_DIR)
        from nccl_car_cli import paths
        self.assertEqual(paths.companion(library, "query"), os.path.join(build, "tools", "nccl_car_query"))
        self.assertEqual(paths.companion(library, "bench"), os.path.join(build, "tests", "car_nccl_bench"))
        # Missing, each is named where this kind of folder would have it (for the messages).
        self.assertEqual(paths.companion(library, "front"), os.path.join(build, "shim", "nccl-car", "front",
                                                                         "libnccl.so.2"))
        os.remove(os.path.join(build, "tools", "nccl_car_query"))
        self.assertEqual(paths.companion(library, "query"), os.path.join(build, "tools", "nccl_car_query"))

    def test_the_tool_names_what_the_built_front_needs(self):
        """The drop-in folder's link names (dropin.py, paths.py) are the ones the front asks for
        (shim/CMakeLists.txt), in its order: the library, then the real NCCL."""
        require_built(self, FRONT)
        sys.path.insert(0, TOOLS_DIR)
        from nccl_car_cli import paths, routes
        self.assertEqual(routes.needed_libraries(FRONT)[:2], [paths.FRONT_OUR_LIBRARY, paths.FRONT_REAL_NCCL])
        self.assertTrue(paths.loads_library(FRONT, os.path.join(BUILD_DIR, "shim", "libnccl-car.so")))

if __name__ == "__main__":
    unittest.main()
