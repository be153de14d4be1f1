"""The runner's one spawn-and-wait loop, with real (tiny) processes."""

import os
import sys
import tempfile
import time
import unittest

import runner_support  # noqa: F401  (puts the runner on the path)
from e2e_runner.launch import TIMED_OUT, Launch, outcomes, run_one, run_together


def python(code):
    return [sys.executable, "-c", code]


class LaunchTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.addCleanup(self.folder.cleanup)

    def launch(self, name, argv, limit=30, **env):
        return Launch(argv, dict(os.environ, **env), os.path.join(self.folder.name, name + ".log"), limit)

    def test_exit_codes_and_logs_come_back_in_order(self):
        finished = run_together([
            self.launch("a", python("import sys; print('out a'); print('err a', file=sys.stderr); sys.exit(3)")),
            self.launch("b", python("import os; print(os.environ['RANK_NAME'])"), RANK_NAME="rank b")])
        codes, texts = outcomes(finished)
        self.assertEqual(codes, [3, 0])
        self.assertEqual(sorted(texts[0].split()), sorted("out a err a".split()))
        self.assertEqual(texts[1], "rank b\n")

    def test_the_processes_run_at_the_same_time(self):
        # Each waits for the other's file: run one after the other, neither could finish.
        first, second = (os.path.join(self.folder.name, name) for name in ("first", "second"))
        meet = ("import os, sys, time\nopen(sys.argv[1], 'w').close()\n"
                "while not os.path.exists(sys.argv[2]): time.sleep(0.01)\n")
        finished = run_together([self.launch("p0", python(meet) + [first, second], limit=20),
                                 self.launch("p1", python(meet) + [second, first], limit=20)])
        self.assertEqual([run.returncode for run in finished], [0, 0])

    def test_a_process_past_its_limit_is_stopped_with_its_children(self):
        child_pid_file = os.path.join(self.folder.name, "child.pid")
        # A launcher whose child would outlive it, as mpirun's or torchrun's ranks.
        code = ("import subprocess, sys, time\n"
                "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                f"open({child_pid_file!r}, 'w').write(str(child.pid))\n"
                "time.sleep(60)\n")
        start = time.monotonic()
        slow, quick = run_together([self.launch("slow", python(code), limit=1.5),
                                    self.launch("quick", python("print('done')"), limit=30)])
        self.assertLess(time.monotonic() - start, 15)
        self.assertEqual(slow.returncode, TIMED_OUT)
        self.assertGreaterEqual(slow.seconds, 1.5)
        self.assertEqual(quick.returncode, 0)
        with open(child_pid_file) as pid_file:
            child = int(pid_file.read())
        for _ in range(100):  # the child is gone (or a zombie about to be reaped by init)
            try:
                with open(f"/proc/{child}/stat") as stat:
                    if stat.read().split()[2] == "Z":
                        break
            except FileNotFoundError:
                break
            time.sleep(0.05)
        else:
            self.fail(f"the launcher's child {child} still runs")

    def test_a_signal_reads_as_128_plus_its_number(self):
        run = run_one(self.launch("killed", python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")))
        self.assertEqual(run.returncode, 128 + 9)

    def test_a_missing_program_is_127_and_says_so(self):
        run = run_one(self.launch("missing", [os.path.join(self.folder.name, "no-such-program")]))
        self.assertEqual(run.returncode, 127)
        self.assertIn("cannot start", run.text)


if __name__ == "__main__":
    unittest.main()
