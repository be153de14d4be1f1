"""Choosing the mode of `nccl-car run` from the command, and the modes' environments."""

import json
import os
import sys
import tempfile
import unittest

from cli_support import REPO_ROOT, clean_env, require_built, run_tool, stand_in_library, write_script
from nccl_car_cli import host_probe, routes

BUILD_DIR = os.environ.get("CAR_BUILD_DIR", os.path.join(REPO_ROOT, "build"))
LINKED_DRIVER = os.path.join(BUILD_DIR, "tests", "shim_driver")
LIBRARY = os.path.join(BUILD_DIR, "shim", "libnccl-car.so")

# Prints the variables that carry the library in, then exits 0 without any NCCL call.
ENV_PROGRAM = """\
#!{python}
import json, os
print(json.dumps({{k: os.environ.get(k) for k in ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH",
                                                   "NCCL_CAR_NCCL_LIB")}}))
"""


class ChooseTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.folder.cleanup()

    def script(self, name, text):
        return write_script(os.path.join(self.folder.name, name), text)

    def test_python_scripts(self):
        jax = self.script("jax_program.py", "import os\nimport jax.numpy as jnp\n")
        self.assertEqual(routes.choose(["python3", jax])[0], "audit")
        self.assertIn("jax_program.py imports jax", routes.choose(["python3", jax])[1])
        torch = self.script("train.py", "import torch\nimport torch.distributed as dist\n")
        self.assertEqual(routes.choose(["torchrun", "--nproc-per-node", "8", torch]),
                         ("preload", "train.py imports torch (PyTorch links NCCL)"))
        both = self.script("mixed.py", "import torch\nfrom vllm import LLM\n")
        self.assertEqual(routes.choose(["python3", both])[0], "audit")  # vLLM's PyNccl needs it
        binding = self.script("binding.py", "import ctypes\nnccl = ctypes.CDLL(os.environ['NCCL_SO'])  # libnccl\n")
        self.assertEqual(routes.choose(["python3", binding])[0], "audit")

    def test_modules(self):
        self.assertEqual(routes.choose(["python3", "-m", "vllm.entrypoints.openai.api_server"])[0], "audit")
        self.assertEqual(routes.choose(["python3", "-m", "torch.distributed.run", "x.py"])[0], "preload")

    def test_entry_point_script_with_a_python_shebang(self):
        launcher = self.script("launcher", "#!/usr/bin/env python3\nfrom tensorflow import keras\n")
        self.assertEqual(routes.choose([launcher])[0], "audit")

    def test_nothing_known(self):
        mode, why = routes.choose([sys.executable, "-c", "print(1)"])
        self.assertEqual(mode, "preload")
        self.assertIn("nothing in the command shows", why)

    def test_executables(self):
        require_built(self, LINKED_DRIVER, LIBRARY)
        self.assertEqual(routes.nccl_use(LINKED_DRIVER), "links")
        self.assertEqual(routes.choose([LINKED_DRIVER, "lifecycle"])[0], "preload")
        # libnccl-car.so names libnccl.so.2 (it dlopens the real one) without linking it.
        self.assertEqual(routes.nccl_use(LIBRARY), "loads")
        self.assertIsNone(routes.nccl_use(os.path.join(REPO_ROOT, "README.md")))

    def test_installed_packages(self):
        present = {"jax": "0.8.1", "torch": None}
        found = routes.installed_packages(lambda name: object() if name in present else None,
                                          lambda name: present[name] or "")
        self.assertEqual(found, [("jax", "0.8.1", "loads"), ("torch", "", "links")])


class ModeEnvironmentTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.library = stand_in_library(self.folder.name)
        # Any file will do for the checks here (the loader ignores a module it cannot use): the
        # audit module, the front beside the library, and a real NCCL.
        open(os.path.join(self.folder.name, "libnccl-car-audit.so"), "w").close()
        os.makedirs(os.path.join(self.folder.name, "nccl-car", "front"))
        self.front = os.path.join(self.folder.name, "nccl-car", "front", "libnccl.so.2")
        open(self.front, "w").close()
        self.real = os.path.join(self.folder.name, "real", "libnccl.so.2")
        os.makedirs(os.path.dirname(self.real))
        open(self.real, "w").close()
        self.program = write_script(os.path.join(self.folder.name, "program"),
                                    ENV_PROGRAM.format(python=sys.executable))

    def tearDown(self):
        self.folder.cleanup()

    def child_env(self, *options, **env):
        result = run_tool("run", "--lib", self.library, *options, "--", self.program,
                          env=clean_env(**env))
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout.splitlines()[0]), result.stderr

    def test_audit(self):
        env, _ = self.child_env("--mode", "audit", LD_PRELOAD=f"{self.library}:/x/other.so", LD_AUDIT="/x/a.so")
        self.assertEqual(env["LD_AUDIT"], os.path.join(self.folder.name, "libnccl-car-audit.so") + ":/x/a.so")
        self.assertEqual(env["LD_PRELOAD"], "/x/other.so")  # the library comes in one way only

    def test_dropin(self):
        """A drop-in folder made for the run (nccl-car dropin's, dropin.py), first on LD_LIBRARY_PATH."""
        program = write_script(os.path.join(self.folder.name, "lister"), f"#!{sys.executable}\n"
                               "import json, os\nfolder = os.environ['LD_LIBRARY_PATH'].split(':')[0]\n"
                               "print(json.dumps({name: os.readlink(os.path.join(folder, name)) "
                               "for name in sorted(os.listdir(folder))}))\n"
                               "print(json.dumps({k: os.environ.get(k) for k in ('LD_PRELOAD', 'LD_LIBRARY_PATH')}))\n")
        result = run_tool("run", "--lib", self.library, "--mode", "dropin", "--nccl-lib", self.real, "--", program,
                          env=clean_env(LD_LIBRARY_PATH="/x/lib"))
        self.assertEqual(result.returncode, 0, result.stderr)
        links, env = (json.loads(line) for line in result.stdout.splitlines()[:2])
        self.assertEqual(links, {"libnccl.so.2": os.path.realpath(self.front),
                                 "libnccl-car.so": os.path.realpath(self.library),
                                 "libnccl-car-real.so.2": os.path.realpath(self.real)})
        folder, rest = env["LD_LIBRARY_PATH"].split(":", 1)
        self.assertEqual(rest, "/x/lib")
        self.assertTrue(os.path.basename(folder).startswith("nccl-car-dropin-"))
        self.assertFalse(os.path.exists(folder))  # made for the run, removed after it
        self.assertIsNone(env["LD_PRELOAD"])

    def test_dropin_needs_a_real_nccl_and_the_front(self):
        result = run_tool("run", "--lib", self.library, "--mode", "dropin", "--", self.program,
                          env=clean_env(NCCL_CAR_NCCL_LIB="/nonexistent/libnccl.so.2"))
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertIn("NCCL_CAR_NCCL_LIB /nonexistent/libnccl.so.2: no such file (it takes the path of the real "
                      "libnccl.so.2)", result.stderr)
        os.remove(self.front)
        result = run_tool("run", "--lib", self.library, "--mode", "dropin", "--nccl-lib", self.real, "--",
                          self.program)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertIn(f"the front {self.front} is missing beside {self.library}", result.stderr)

    def test_auto_says_what_it_chose(self):
        _, stderr = self.child_env()
        self.assertIn("nccl-car run: mode preload: nothing in the command shows", stderr)

    def test_missing_audit_module(self):
        os.remove(os.path.join(self.folder.name, "libnccl-car-audit.so"))
        result = run_tool("run", "--lib", self.library, "--mode", "audit", "--", "true")
        self.assertEqual(result.returncode, 3)
        self.assertIn("libnccl-car-audit.so", result.stderr)

    def test_no_communicator_is_said_plainly_with_the_other_mode(self):
        cases = {"preload": ("it was preloaded, but no NCCL call reached it", "try: --mode audit"),
                 "audit": ("the audit module (LD_AUDIT) saw no load of libnccl.so", "try: --mode preload"),
                 "dropin": ("its libnccl.so.2 was first on LD_LIBRARY_PATH", "try: --mode audit")}
        for mode, (what, other) in cases.items():
            with self.subTest(mode=mode):
                _, stderr = self.child_env("--mode", mode, "--nccl-lib", self.real)
                self.assertIn("nccl-car: no communicator reached the library: " + what, stderr)
                self.assertIn("  likely cause: ", stderr)
                self.assertIn(other, stderr)
                self.assertNotIn("no NCCL-CAR line was seen", stderr)  # said once, plainly

    def test_calls_without_a_communicator(self):
        talker = write_script(os.path.join(self.folder.name, "talker"), f"#!{sys.executable}\n"
                              "import sys\nsys.stderr.write('h:1:1 [-1] NCCL-CAR INFO real NCCL found as x\\n')\n")
        result = run_tool("run", "--lib", self.library, "--mode", "preload", "--", talker, env=clean_env())
        self.assertIn("NCCL calls reached it, but no communicator was created through it", result.stderr)
        self.assertIn("try: --mode audit", result.stderr)

    def test_disabled_run_says_nothing_about_communicators(self):
        _, stderr = self.child_env("--disable")
        self.assertNotIn("no communicator reached", stderr)


if __name__ == "__main__":
    unittest.main()


class DoctorRoutesTest(unittest.TestCase):
    def test_doctor_names_the_mode_a_command_needs(self):
        with tempfile.TemporaryDirectory() as folder:
            script = write_script(os.path.join(folder, "psum.py"), "import jax\n")
            result = run_tool("doctor", "--", "python3", script)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("command:   nccl-car run would use --mode audit: psum.py imports jax", result.stdout)
            self.assertIn("modes:     preload (LD_PRELOAD) for programs linked against libnccl.so.2", result.stdout)
            report = json.loads(run_tool("doctor", "--json", "--", "python3", script).stdout)
            self.assertEqual(report["routes"]["command"]["mode"], "audit")
            self.assertTrue(report["routes"]["audit_module"]["path"].endswith("/libnccl-car-audit.so"))

    def test_without_a_command_doctor_says_no_mode(self):
        report = json.loads(run_tool("doctor", "--json").stdout)
        self.assertIsNone(report["routes"]["command"])


class ProbeTest(unittest.TestCase):
    def test_the_library_and_its_front_are_never_the_real_nccl(self):
        front = os.path.join(os.path.dirname(LIBRARY), "nccl-car", "front", "libnccl.so.2")
        require_built(self, LIBRARY, front)
        for ours in (LIBRARY, front):
            loaded = []
            found = host_probe.locate_nccl({"NCCL_CAR_NCCL_LIB": ours}, [], load=lambda target: loaded.append(target),
                                           exclude=LIBRARY)
            self.assertEqual(found["tried"][0], {"source": "NCCL_CAR_NCCL_LIB", "target": ours,
                                                 "error": "is libnccl-car.so itself"})
            self.assertNotIn(ours, loaded)  # not even loaded into the tool
