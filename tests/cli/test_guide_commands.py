"""The user guide's commands that need no GPU, run as written (the user's program swapped
for a harmless one): each command must still appear in the guide, so the two cannot
drift apart. The library-loading check runs the real libnccl-car.so over the stand-in
NCCL that the shim tests build (CAR_BUILD_DIR, set by ctest)."""

import os
import subprocess
import sys
import tempfile
import unittest

from cli_support import BUILD_DIR, REPO_ROOT, clean_env, require_built, run_tool

GUIDE = os.path.join(REPO_ROOT, "docs", "user-guide.md")
LIBRARY = os.path.join(BUILD_DIR, "shim", "libnccl-car.so")
DRIVER = os.path.join(BUILD_DIR, "tests", "shim_driver")
STANDIN_FOLDER = os.path.join(BUILD_DIR, "tests", "standin")
CTYPES_CLIENT = os.path.join(REPO_ROOT, "tests", "shim", "ctypes_client.py")


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

    def test_did_it_work_lines(self):
        """'Did it work?': with NCCL_CAR_DEBUG=INFO every communicator prints a setup: and a
        released: line, and `nccl-car run` sums them."""
        require_built(self, DRIVER, LIBRARY)
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

    def test_programs_that_load_nccl_themselves(self):
        """'Which command for which program': the LD_AUDIT and drop-in commands, and the
        tool's auto mode, reach a ctypes client (PyNccl's way) over the stand-in NCCL."""
        require_built(self, LIBRARY, STANDIN_FOLDER)
        car = os.path.dirname(LIBRARY)
        # The guide's drop-in folder, made by the tool for the NCCL it finds (the stand-in).
        self.assert_in_guide("tools/nccl-car dropin /tmp/nccl-dropin")
        with tempfile.TemporaryDirectory() as scratch:
            dropin = os.path.join(scratch, "nccl-dropin")
            made = run_tool("dropin", "--lib", LIBRARY, dropin, env=clean_env(LD_LIBRARY_PATH=STANDIN_FOLDER))
            self.assertEqual(made.returncode, 0, made.stderr)
            self.assertEqual(os.path.realpath(os.path.join(dropin, "libnccl-car-real.so.2")),
                             os.path.realpath(os.path.join(STANDIN_FOLDER, "libnccl.so.2")))
            commands = {
                "LD_AUDIT=$CAR/libnccl-car-audit.so python3 ": {"LD_AUDIT": os.path.join(car, "libnccl-car-audit.so"),
                                                                "LD_LIBRARY_PATH": STANDIN_FOLDER},
                "LD_LIBRARY_PATH=/tmp/nccl-dropin:$LD_LIBRARY_PATH python3 ": {
                    "LD_LIBRARY_PATH": dropin + ":" + STANDIN_FOLDER},
            }
            for command, variables in commands.items():
                with self.subTest(command=command):
                    self.assert_in_guide(command)
                    env = clean_env(NCCL_CAR_DEBUG="INFO", **variables)
                    result = subprocess.run([sys.executable, CTYPES_CLIENT, "libnccl.so.2"], env=env,
                                            capture_output=True, text=True, timeout=120)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    self.assertIn("released: taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 "
                                  "(0 bytes) forwarded 1", result.stderr)
        self.assert_in_guide("tools/nccl-car run -- python3 jax_program.py")
        result = run_tool("run", "--lib", LIBRARY, "--", sys.executable, CTYPES_CLIENT, "libnccl.so.2",
                          env=clean_env(LD_LIBRARY_PATH=STANDIN_FOLDER))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("nccl-car run: mode audit: ctypes_client.py uses ctypes", result.stderr)
        self.assertIn("1 communicator(s), 1 communicator rank(s) set up", result.stderr)


if __name__ == "__main__":
    unittest.main()
