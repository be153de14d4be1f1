"""nccl-car dropin: the folder it makes (three links: the front, the library, the real
NCCL), what it refuses and why. The shim tests run programs through such folders
(tests/shim/route_runs.cc); here the files are stand-ins."""

import os
import tempfile
import unittest

from cli_support import clean_env, run_tool, stand_in_library


class DropinTest(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.root = folder.name
        self.library = stand_in_library(self.root)
        self.front = os.path.join(self.root, "nccl-car", "front", "libnccl.so.2")
        os.makedirs(os.path.dirname(self.front))
        open(self.front, "w").close()
        self.real = self.file("real", "libnccl.so.2")
        self.other_real = self.file("other", "libnccl.so.2")
        self.folder = os.path.join(self.root, "made")

    def file(self, *parts):
        path = os.path.join(self.root, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").close()
        return path

    def dropin(self, *options, **env):
        return run_tool("dropin", "--lib", self.library, *options, self.folder, env=clean_env(**env))

    def links(self):
        return {name: os.readlink(os.path.join(self.folder, name)) for name in sorted(os.listdir(self.folder))}

    def test_makes_the_three_links_and_says_how_to_use_them(self):
        result = self.dropin("--nccl-lib", self.real)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.links(), {"libnccl-car-real.so.2": self.real, "libnccl-car.so": self.library,
                                        "libnccl.so.2": self.front})
        self.assertIn(f"nccl-car dropin: {self.folder}: libnccl.so.2 is nccl-car ({self.library}) in front of "
                      f"{self.real} (--nccl-lib)", result.stdout)
        self.assertIn(f"export LD_LIBRARY_PATH={self.folder}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}", result.stdout)

    def test_made_again_for_another_nccl(self):
        self.assertEqual(self.dropin("--nccl-lib", self.real).returncode, 0)
        result = self.dropin(NCCL_CAR_NCCL_LIB=self.other_real)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(self.links()["libnccl-car-real.so.2"], self.other_real)
        self.assertIn("(NCCL_CAR_NCCL_LIB)", result.stdout)

    def test_refuses_a_folder_with_other_files(self):
        self.file("made", "notes.txt")
        result = self.dropin("--nccl-lib", self.real)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn(f"{self.folder} holds other files (notes.txt): give a new or empty folder", result.stderr)
        self.assertEqual(os.listdir(self.folder), ["notes.txt"])

    def test_what_is_missing_is_said_before_anything_is_made(self):
        cases = [(["--nccl-lib", "/nonexistent/libnccl.so.2"], {}, 2,
                  "argument --nccl-lib: /nonexistent/libnccl.so.2: no such file (it takes the path of the real "
                  "libnccl.so.2)"),
                 ([], {"NCCL_CAR_NCCL_LIB": "/nonexistent/libnccl.so.2"}, 3,
                  "NCCL_CAR_NCCL_LIB /nonexistent/libnccl.so.2: no such file")]
        for options, env, code, message in cases:
            with self.subTest(options=options, env=env):
                result = self.dropin(*options, **env)
                self.assertEqual(result.returncode, code, result.stderr)
                self.assertIn(message, result.stderr)
                self.assertFalse(os.path.exists(self.folder))
        os.remove(self.front)
        result = self.dropin("--nccl-lib", self.real)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertIn(f"the front {self.front} is missing beside {self.library}", result.stderr)
        result = run_tool("dropin", "--lib", "/nonexistent/libnccl-car.so", "--nccl-lib", self.real, self.folder)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertFalse(os.path.exists(self.folder))


if __name__ == "__main__":
    unittest.main()
