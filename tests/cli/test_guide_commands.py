"""The user guide's commands that need no GPU, run as written (the user's program swapped
for a harmless one): each command must still appear in the guide, so the two cannot
drift apart. The library-loading check runs the real libnccl-car.so over the stand-in
NCCL that the shim tests build (CAR_BUILD_DIR, set by ctest)."""

import os
import unittest

from cli_support import REPO_ROOT, clean_env, run_tool

GUIDE = os.path.join(REPO_ROOT, "docs", "user-guide.md")
BUILD_DIR = os.environ.get("CAR_BUILD_DIR", os.path.join(REPO_ROOT, "build"))
LIBRARY = os.path.join(BUILD_DIR, "shim", "libnccl-car.so")
DRIVER = os.path.join(BUILD_DIR, "tests", "shim_driver")


def guide_text():
    with open(GUIDE) as guide:
        return guide.read()


class GuideCommands(unittest.TestCase):
    def assert_in_guide(self, command):
        self.assertIn(command, guide_text(), "the guide no longer shows this command; update the test")

    def test_doctor(self):
        self.assert_in_guide("tools/nccl-car doctor")
        result = run_tool("doctor")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("verdict:", result.stdout)

    def test_run_passes_options_as_settings(self):
        self.assert_in_guide("tools/nccl-car run --algo 2stage --max-bytes 4M -- ")
        result = run_tool("run", "--lib", LIBRARY, "--algo", "2stage", "--max-bytes", "4M", "--",
                          "sh", "-c", 'echo "$NCCL_CAR_ALGO $NCCL_CAR_MAX_BYTES"')
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "2stage 4194304")

    def test_run_disable_switches_it_off(self):
        self.assert_in_guide("tools/nccl-car run --disable -- ")
        result = run_tool("run", "--lib", LIBRARY, "--disable", "--", "sh", "-c", 'echo "$NCCL_CAR_DISABLE"')
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "1")

    @unittest.skipUnless(os.path.exists(DRIVER) and os.path.exists(LIBRARY), "the build has no shim_driver")
    def test_did_it_work_lines(self):
        """'Did it work?': with NCCL_CAR_DEBUG=INFO every communicator prints a setup: and a
        released: line, and `nccl-car run` sums them."""
        self.assert_in_guide("NCCL_CAR_DEBUG=INFO")
        self.assert_in_guide("tools/nccl-car run -- ")
        log = os.path.join(BUILD_DIR, "guide-standin-calls.log")
        env = clean_env(STANDIN_NCCL_LOG=log)
        result = run_tool("run", "--lib", LIBRARY, "--", DRIVER, "lifecycle", env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("NCCL-CAR INFO", result.stderr)
        self.assertIn("setup: not eligible:", result.stderr)  # no GPU on this machine
        self.assertIn("released:", result.stderr)
        self.assertRegex(result.stderr, r"forwarded to NCCL: [1-9][0-9]* call")


if __name__ == "__main__":
    unittest.main()
