"""The top-level command: subcommands, help and exit codes."""

import os
import subprocess
import tempfile
import unittest

from cli_support import REPO_ROOT, TOOL, clean_env, run_tool


class MainTest(unittest.TestCase):
    def test_every_subcommand_has_help(self):
        for subcommand, words in (("doctor", "--json"), ("run", "NCCL_CAR_MAX_BYTES"),
                                  ("bench", "--all-reduce-perf")):
            with self.subTest(subcommand=subcommand):
                result = run_tool(subcommand, "--help")
                self.assertEqual(result.returncode, 0)
                self.assertIn("exit codes:", result.stdout)
                self.assertIn(words, result.stdout)

    def test_top_level(self):
        result = run_tool("--help")
        self.assertEqual(result.returncode, 0)
        for subcommand in ("doctor", "run", "bench"):
            self.assertIn(subcommand, result.stdout)
        self.assertEqual(run_tool().returncode, 2)
        result = run_tool("frobnicate")
        self.assertEqual(result.returncode, 2)
        self.assertIn("invalid choice: 'frobnicate'", result.stderr)
        self.assertEqual(run_tool("doctor", "--verbose").returncode, 2)

    def test_executable_through_its_shebang_and_a_symlink(self):
        self.assertTrue(os.access(TOOL, os.X_OK))
        with open(TOOL) as stream:
            self.assertEqual(stream.readline(), "#!/usr/bin/env python3\n")
        # The repository is found from the real file, so a link elsewhere still works.
        with tempfile.TemporaryDirectory() as folder:
            link = os.path.join(folder, "nccl-car")
            os.symlink(TOOL, link)
            result = subprocess.run([link, "doctor", "--json"], capture_output=True, text=True, cwd="/",
                                    env=clean_env(CUDA_VISIBLE_DEVICES=""))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(os.path.join(REPO_ROOT, "build", "shim", "libnccl-car.so"), result.stdout)


if __name__ == "__main__":
    unittest.main()
