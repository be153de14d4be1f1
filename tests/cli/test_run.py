"""nccl-car run, end to end, with a stand-in library and a fake program."""

import json
import os
import sys
import tempfile
import unittest

import cli_support
from cli_support import clean_env, run_tool, stand_in_library, write_script
from nccl_car_cli.logparse import LogTally

# Prints its environment as JSON on stdout (plus a line without a newline, to show stdout
# is passed through untouched), the library's log lines from {log} on stderr among other
# lines, then exits with argv[1] or kills itself with signal -argv[1].
FAKE_PROGRAM = """\
#!{python}
import json, os, signal, sys
sys.stdout.write(json.dumps({{k: v for k, v in os.environ.items()
                              if k.startswith("NCCL_CAR_") or k == "LD_PRELOAD"}}) + "\\n")
sys.stdout.write("no newline at the end")
sys.stdout.flush()
sys.stderr.write("epoch 1\\n")
with open({log!r}) as lines:
    for number, line in enumerate(lines):
        sys.stderr.write(line)
        if number == 2:
            sys.stderr.write("progress 50%\\rprogress 100%\\n")
sys.stderr.flush()
code = int(sys.argv[1])
if code < 0:
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


class RunTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.library = stand_in_library(self.folder.name)
        self.log = os.path.join(self.folder.name, "log")
        open(self.log, "w").close()
        self.program = write_script(os.path.join(self.folder.name, "program"),
                                    FAKE_PROGRAM.format(python=sys.executable, log=self.log))

    def tearDown(self):
        self.folder.cleanup()

    def run_program(self, *options, code=0, **env):
        return run_tool("run", "--lib", self.library, *options, "--", self.program, str(code),
                        env=clean_env(**env))

    def child_env(self, result):
        return json.loads(result.stdout.splitlines()[0])

    def test_exit_code_output_and_summary(self):
        # The library's own lines (nccl_car_query log-samples), as its ranks would write them.
        lines = [sample["line"] for sample in cli_support.query_program(self).log_samples()]
        with open(self.log, "w") as log:
            log.writelines(line + "\n" for line in lines)
        tally = LogTally()
        for line in lines:
            tally.feed(line)
        self.assertGreater(tally.setups, 0)

        result = self.run_program(code=7)
        self.assertEqual(result.returncode, 7, result.stderr)
        self.assertTrue(result.stdout.endswith("\nno newline at the end"))
        self.assertIn("epoch 1\n", result.stderr)
        self.assertIn("progress 50%\rprogress 100%\n", result.stderr)
        self.assertIn("".join(line + "\n" for line in lines[3:]), result.stderr)
        # After everything the program wrote: its exit, then the summary of its lines.
        self.assertTrue(result.stderr.endswith(f"nccl-car run: {self.program} exited with 7\n" +
                                               "".join(line + "\n" for line in tally.summary_lines())))

    def test_zero_exit(self):
        self.assertEqual(self.run_program(code=0).returncode, 0)

    def test_killed_child(self):
        result = self.run_program(code=-15)
        self.assertEqual(result.returncode, 128 + 15)
        self.assertIn("was killed by signal 15", result.stderr)

    def test_options_become_variables(self):
        real = os.path.join(self.folder.name, "libnccl.so.2")
        open(real, "w").close()
        result = self.run_program("--algo", "2stage", "--max-bytes", "512K", "--max-blocks", "8",
                                  "--disable", "--debug", "trace", "--nccl-lib", real,
                                  LD_PRELOAD="/usr/lib/other.so")
        env = self.child_env(result)
        self.assertEqual(env["LD_PRELOAD"], f"{self.library}:/usr/lib/other.so")
        self.assertEqual(env["NCCL_CAR_ALGO"], "2stage")
        self.assertEqual(env["NCCL_CAR_MAX_BYTES"], str(512 << 10))
        self.assertEqual(env["NCCL_CAR_MAX_BLOCKS"], "8")
        self.assertEqual(env["NCCL_CAR_DISABLE"], "1")
        self.assertEqual(env["NCCL_CAR_DEBUG"], "TRACE")
        self.assertEqual(env["NCCL_CAR_NCCL_LIB"], real)

    def test_debug_is_at_least_info(self):
        self.assertEqual(self.child_env(self.run_program())["NCCL_CAR_DEBUG"], "INFO")
        result = self.run_program("--debug", "WARN")
        self.assertEqual(self.child_env(result)["NCCL_CAR_DEBUG"], "INFO")
        self.assertIn("--debug WARN raised to INFO", result.stderr)
        self.assertEqual(self.child_env(self.run_program(NCCL_CAR_DEBUG="TRACE"))["NCCL_CAR_DEBUG"], "TRACE")
        env = self.child_env(self.run_program())
        self.assertNotIn("NCCL_CAR_ALGO", env)  # nothing set that was not asked for

    def test_library_from_the_variable(self):
        result = run_tool("run", "--", self.program, "0", env=clean_env(NCCL_CAR_LIB=self.library))
        self.assertEqual(self.child_env(result)["LD_PRELOAD"], self.library)

    def test_silent_program(self):
        result = run_tool("run", "--lib", self.library, "--", sys.executable, "-c", "print('hi')")
        self.assertEqual(result.returncode, 0)
        self.assertEqual(result.stdout, "hi\n")
        self.assertIn("no communicator reached the library: it was preloaded, but no NCCL call reached it",
                      result.stderr)

    def test_command_not_found_or_not_executable(self):
        result = run_tool("run", "--lib", self.library, "--", "/nonexistent/program")
        self.assertEqual(result.returncode, 127)
        self.assertIn("command not found", result.stderr)
        plain = os.path.join(self.folder.name, "plain")
        open(plain, "w").close()
        self.assertEqual(run_tool("run", "--lib", self.library, "--", plain).returncode, 126)

    def test_usage_errors(self):
        for options in (["--"], [], ["--algo", "fast", "--", "true"], ["--max-bytes", "17", "--", "true"],
                        ["--max-bytes", "2G", "--", "true"], ["--max-blocks", "257", "--", "true"],
                        ["--max-blocks", "x", "--", "true"], ["--debug", "LOUD", "--", "true"],
                        ["--bogus", "--", "true"]):
            with self.subTest(options=options):
                result = run_tool("run", "--lib", self.library, *options)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn("error:", result.stderr)

    def test_refusals_are_the_library_s_own_words(self):
        result = run_tool("run", "--lib", self.library, "--max-bytes", "8K", "--max-blocks", "257", "--", "true")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("nccl-car run: error: the library would ignore it: invalid value '257' for "
                      "NCCL_CAR_MAX_BLOCKS (expected 1 to 256), using default 256", result.stderr)
        self.assertNotIn("NCCL_CAR_MAX_BYTES", result.stderr)  # 8K is fine

    def test_without_the_query_program_values_pass_unchecked(self):
        result = self.run_program("--max-bytes", "17", NCCL_CAR_QUERY="/nonexistent/query")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("nccl-car run: option values not checked: the query program is not built", result.stderr)
        self.assertEqual(self.child_env(result)["NCCL_CAR_MAX_BYTES"], "17")

    def test_missing_library(self):
        result = run_tool("run", "--lib", "/nonexistent/libnccl-car.so", "--", "true")
        self.assertEqual(result.returncode, 3)
        self.assertIn("scripts/build.sh", result.stderr)

    # Issue 47, item 4: each setting or option that used to go unsaid gets one line naming it,
    # what it takes and what happens instead.
    def test_a_library_that_is_no_library_is_said_before_anything_runs(self):
        result = run_tool("run", "--lib", self.program, "--", "true")
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertIn(f"nccl-car run: error: {self.program} (from --lib) is not a shared library: it takes "
                      "libnccl-car.so; nothing was run", result.stderr)
        self.assertNotIn("--mode audit", result.stderr)

    def test_a_real_nccl_that_is_no_file_is_said_before_anything_runs(self):
        result = run_tool("run", "--lib", self.library, "--nccl-lib", "/nonexistent/libnccl.so.2", "--",
                          self.program, "0")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("argument --nccl-lib: /nonexistent/libnccl.so.2: no such file (it takes the path of the real "
                      "libnccl.so.2); nothing was run", result.stderr)
        self.assertEqual(result.stdout, "")

    def test_disable_says_the_library_was_switched_off(self):
        for how in (("--disable",), ()):
            with self.subTest(how=how):
                env = {} if how else {"NCCL_CAR_DISABLE": "1"}
                result = self.run_program(*how, **env)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("nccl-car run: NCCL_CAR_DISABLE=1 (--disable, or the environment) switched the library "
                              "off: every NCCL call went to NCCL untouched", result.stderr)

    def test_max_blocks_states_one_range_the_library_s(self):
        for value in ("0", "257", "-3"):
            with self.subTest(value=value):
                result = run_tool("run", "--lib", self.library, "--max-blocks", value, "--", "true")
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(f"invalid value '{value}' for NCCL_CAR_MAX_BLOCKS (expected 1 to 256)", result.stderr)
                self.assertNotIn("2147483648", result.stderr)


if __name__ == "__main__":
    unittest.main()
