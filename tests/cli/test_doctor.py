"""doctor: the verdict for several machines, the probes, and the command on this one."""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

import cli_support
from cli_support import clean_env, run_tool
from nccl_car_cli import doctor, host_probe, library_query
from nccl_car_cli.units import format_size


def machine(n, p2p=True, nvlink=True):
    """A probe_gpus() report: p2p/nvlink are True/False for every pair, None (NVLink
    unknown) or a set of connected pairs (i, j) with i < j."""
    def matrix(links):
        if links is None:
            return None
        return [[i == j or (links is True) or (isinstance(links, set) and (min(i, j), max(i, j)) in links)
                 for j in range(n)] for i in range(n)]
    gpus = [{"index": i, "name": "GPU", "pci_bus_id": f"0000:{i:02x}:00.0",
             "compute_capability": "9.0", "memory_bytes": 1 << 30} for i in range(n)]
    return {"driver_error": None if n else "cuInit failed: CUDA_ERROR_NO_DEVICE",
            "driver_version": "12.8", "gpus": gpus, "p2p": matrix(p2p) if n else None,
            "nvlink": matrix(nvlink), "nvlink_error": None if nvlink is not None else "NVML absent"}


class VerdictTest(unittest.TestCase):
    """The verdict on fake machines, with the library's own decisions (this build's query
    program): the tool finds the groups of GPUs, the library says what it takes."""

    def setUp(self):
        self.query = cli_support.query_program(self)

    def judge(self, report, **env):
        return doctor.judge(report, library_query.effective_settings(env, self.query), self.query, env)

    def verdict_of(self, report, **env):
        judged = self.judge(report, **env)
        return judged["line"], judged["accelerates"]

    def test_no_gpu(self):
        line, accelerates = self.verdict_of(machine(0))
        self.assertEqual(line, "verdict: no GPU visible: the library would forward every call to NCCL")
        self.assertFalse(accelerates)

    def test_one_gpu(self):
        line, accelerates = self.verdict_of(machine(1))
        self.assertIn("1 GPU", line)
        self.assertFalse(accelerates)

    def test_full_nvlink(self):
        self.assertEqual(self.verdict_of(machine(4))[0], "verdict: 4 GPUs, full NVLink: all-reduces up to "
                                                         "8 MiB between 2..4 ranks would be accelerated")
        self.assertIn("between 2 ranks would", self.verdict_of(machine(2))[0])
        self.assertIn("up to 1 MiB", self.verdict_of(machine(4), NCCL_CAR_MAX_BYTES="1048576")[0])

    def test_kernels_by_size_come_from_the_policy(self):
        # Which kernel, and where the switch points lie, is the library's to tune: asserted
        # here are the order of the kernels, the ends of the ranges, and that the settings
        # reach the policy.
        def kernels(candidate):
            names = [decision["algorithm"] for decision in candidate["decisions"]]
            return [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]

        judged = self.judge(machine(4))
        self.assertEqual([kernels(candidate) for candidate in judged["communicators"]], [["1shot", "2shot"]] * 3)
        line = doctor.communicator_line(judged["communicators"][2])
        self.assertRegex(line, r"^    4 ranks on GPUs 0,1,2,3 \(NVLink, sm_90\): 1shot 16 B\.\.\S+ \S+, "
                               r"2shot \S+ \S+\.\.8 MiB$")
        judged = self.judge(machine(4), NCCL_CAR_PUSH_MAX_BYTES="0", NCCL_CAR_MAX_BYTES="1048576")
        self.assertEqual([kernels(candidate) for candidate in judged["communicators"]],
                         [["1stage"], ["1stage", "2stage"], ["1stage", "2stage"]])
        judged = self.judge(machine(2), NCCL_CAR_ALGO="2stage")
        self.assertEqual(doctor.ranges_text(judged["communicators"][0]["decisions"]), "2stage 16 B..8 MiB")

    def expected_takes(self, env, ranks=2):
        """What the note must say the policy takes, collective by collective, from the query
        program's answer for a communicator of `ranks` GPUs of machine()."""
        policy = self.query.policy(env)
        taken = self.query.decide(env, ranks, True, 90, [doctor.SMALLEST_SAMPLE], doctor.SAMPLE_TYPE)["taken"]
        self.assertEqual(list(taken), policy["collectives"])
        said = []
        for collective, answer in taken.items():
            if not answer["types"] or answer["ops"] == []:
                said.append(f"no {collective} calls")
            elif answer["ops"] is None:
                said.append(f"{collective} calls of {', '.join(answer['types'])}")
            else:
                said.append(f"{collective} calls of {', '.join(answer['ops'])} on {', '.join(answer['types'])}")
        return f"with every rank on this host it takes {'; '.join(said)}; "

    def test_note_says_what_the_policy_takes(self):
        # Every collective, with the ops and types its policy takes on these GPUs.
        note = self.judge(machine(2))["note"]
        self.assertIn(self.expected_takes({}), note)
        self.assertIsNone(self.judge(machine(2), NCCL_CAR_DISABLE="1")["note"])

    def test_note_speaks_for_each_collective(self):
        # A collective switched off is said to be, while the all-reduce still is taken: the
        # note claims of each collective only what the query program found for it.
        for variable, collective in (("NCCL_CAR_ALLGATHER_MAX_BYTES", "all-gather"),
                                     ("NCCL_CAR_REDUCESCATTER_MAX_BYTES", "reduce-scatter")):
            with self.subTest(variable=variable):
                env = {variable: "0"}
                note = self.judge(machine(2), **env)["note"]
                self.assertIn(self.expected_takes(env), note)
                self.assertIn(f"; no {collective} calls", note)
        # Several communicators: what every one of them takes (here the same on each).
        note = self.judge(machine(4))["note"]
        self.assertIn(self.expected_takes({}, ranks=4), note)

    def test_more_gpus_than_ranks_supported(self):
        policy = self.query.policy({})
        most = policy["max_ranks"]
        judged = self.judge(machine(2 * most))
        self.assertIn(f"between 2..{most} ranks", judged["line"])
        self.assertIn(f"more than {most} ranks are forwarded", judged["line"])
        self.assertEqual(doctor.ranges_text(judged["communicators"][-1]["decisions"]),
                         f"NCCL (ineligible-comm) {format_size(doctor.SMALLEST_SAMPLE)}.."
                         f"{format_size(policy['max_bytes']['all-reduce'])}")

    def test_disabled(self):
        line, accelerates = self.verdict_of(machine(8), NCCL_CAR_DISABLE="1")
        self.assertEqual(line, "verdict: NCCL_CAR_DISABLE is set: the library would forward every call to NCCL")
        self.assertFalse(accelerates)

    def test_pcie_without_a_table_forwards_everything_two_ranks_included(self):
        line, accelerates = self.verdict_of(machine(4, nvlink=False))
        self.assertEqual(line, "verdict: 4 GPUs, P2P without full NVLink: the library would forward every all-reduce "
                               "to NCCL (untuned); over PCIe, `nccl-car tune` measures this machine first")
        self.assertFalse(accelerates)
        self.assertIn("NVLink unknown", self.verdict_of(machine(4, nvlink=None))[0])
        judged = self.judge(machine(4, nvlink=False))
        self.assertEqual(doctor.machine_case(judged["communicators"], [])["line"],
                         "case:      PCIe, untuned, for 2..4 ranks: every call goes to NCCL until `nccl-car tune` has "
                         "measured this machine (over PCIe the library takes only what that measured)")

    def test_pcie_tuned_takes_what_its_table_says(self):
        rows = "".join(f"all-reduce {ranks} pcie half 0 65536 1shot\n" for ranks in (2, 4))
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "pcie.table")
            with open(path, "w") as out:
                out.write(f"nccl-car choice table 2\nfingerprint 00c0ffee00c0ffee\n{rows}")
            judged = doctor.judge(machine(4, nvlink=False), library_query.effective_settings({}, self.query),
                                  self.query, {}, (path, "00c0ffee00c0ffee"))
        self.assertEqual(judged["line"], "verdict: 4 GPUs, P2P without full NVLink: all-reduces up to 64 KiB between "
                                         "2, 4 ranks would be accelerated; other communicators are forwarded")
        self.assertEqual([doctor.ranges_text(c["decisions"]) for c in judged["communicators"]][1],
                         "NCCL (untuned) 16 B..8 MiB")
        # The rows as the query program lists them (library_query.applicable_table's table_rows);
        # a row of the NVLink case tunes no PCIe communicator.
        rows = [{"collective": "all-reduce", "ranks": ranks, "links": links} for ranks, links in
                ((2, "pcie"), (4, "pcie"), (3, "nvlink"))]
        case = doctor.machine_case(judged["communicators"], rows)
        self.assertEqual(case["name"], "pcie-tuned+pcie-untuned")
        self.assertEqual(case["line"], "case:      PCIe, tuned, for 2, 4 ranks (the table's PCIe rows decide; sizes "
                                       "they do not cover go to NCCL); PCIe, untuned, for 3 ranks: every call goes to "
                                       "NCCL until `nccl-car tune` has measured this machine (over PCIe the library "
                                       "takes only what that measured)")

    def test_the_case_of_each_machine(self):
        self.assertIsNone(doctor.machine_case(self.judge(machine(1))["communicators"], []))
        self.assertEqual(doctor.machine_case(self.judge(machine(4))["communicators"], [])["name"], "nvlink")
        islands = {(a, b) for group in ((0, 1, 2, 3), (4, 5, 6, 7)) for a in group for b in group if a < b}
        case = doctor.machine_case(self.judge(machine(8, nvlink=islands))["communicators"], [])
        self.assertEqual(case["name"], "nvlink+pcie-untuned")
        self.assertTrue(case["line"].startswith("case:      NVLink for 2..4 ranks (the built-in rule, or the table's "
                                                "NVLink rows); PCIe, untuned, for 5..8 ranks: "))

    def test_nvlink_islands(self):
        islands = {(a, b) for group in ((0, 1, 2, 3), (4, 5, 6, 7)) for a in group for b in group if a < b}
        judged = self.judge(machine(8, nvlink=islands))
        self.assertIn("8 GPUs, NVLink between some of them: all-reduces up to 8 MiB between 2..4 ranks", judged["line"])
        self.assertEqual([candidate["full_nvlink"] for candidate in judged["communicators"]],
                         [True, True, True, False, False, False, False])

    def test_partial_and_no_p2p(self):
        judged = self.judge(machine(4, p2p={(0, 1), (2, 3)}, nvlink=False))
        self.assertIn("P2P between some pairs only", judged["line"])
        self.assertEqual([candidate["gpus"] for candidate in judged["communicators"]], [[0, 1]])
        self.assertFalse(judged["accelerates"])   # over PCIe, untuned
        line, accelerates = self.verdict_of(machine(2, p2p=False, nvlink=False))
        self.assertIn("without P2P access", line)
        self.assertFalse(accelerates)

    def test_without_the_query_program(self):
        env = {"NCCL_CAR_QUERY": "/nonexistent"}
        effective = library_query.effective_settings(env, None, "the query program is not built")
        judged = doctor.judge(machine(4), effective, None, env)
        self.assertEqual(judged["line"], "verdict: not known: the query program is not built")
        self.assertIsNone(judged["accelerates"])


class TextReportTest(unittest.TestCase):
    def test_gpus_and_links(self):
        gpus = machine(3, p2p={(0, 1), (1, 2)}, nvlink={(0, 1)})
        cli_support.query_program(self)
        with mock.patch("nccl_car_cli.gpu_probe.probe_gpus", return_value=gpus):
            report = doctor.collect(argparse.Namespace(lib=None), clean_env(NCCL_CAR_MAX_BYTES="1048576"))
        text = doctor.render_text(report)
        self.assertIn("GPUs:      3 visible, CUDA driver 12.8", text)
        self.assertIn("     1  GPU  0000:01:00.0  compute 9.0  1 GiB", text)
        rows = text.split("links:")[1].splitlines()
        self.assertEqual([row.split() for row in rows[2:5]],
                         [["0", ".", "PN", "-"], ["1", "PN", ".", "P"], ["2", "-", "P", "."]])
        self.assertIn("verdict: 3 GPUs, NVLink between some of them: all-reduces up to 1 MiB between "
                      "2 ranks would be accelerated; communicators of more than 2 ranks are forwarded", text)
        self.assertIn("\n    2 ranks on GPUs 0,1 (NVLink, sm_90): 1shot 16 B..", text)
        self.assertTrue(text.endswith(f"\n    {report['verdict_note']}"))
        self.assertIn("with every rank on this host", report["verdict_note"])
        self.assertTrue(report["accelerates"])

    def test_the_table_line_says_a_forced_kernel_takes_the_all_reduces(self):
        # The library's planCall: NCCL_CAR_ALGO chooses every all-reduce's kernel, the table
        # only the other collectives'; the line must not say the table decides everything.
        cli_support.query_program(self)
        with mock.patch("nccl_car_cli.gpu_probe.probe_gpus", return_value=machine(2)):
            report = doctor.collect(argparse.Namespace(lib=None), clean_env(NCCL_CAR_ALGO="2shot"))
        report["choice_table"] = {"path": "/cache/m.table", "used": True, "why": None, "rows": 3, "digest": "ab12"}
        self.assertIn("\ntable:     /cache/m.table (3 rows, digest ab12): the library follows it for the all-gathers "
                      "and reduce-scatters; NCCL_CAR_ALGO=2shot chooses every all-reduce's kernel instead; the "
                      "verdict below does the same\n", doctor.render_text(report))
        self.assertEqual(doctor.table_line(report["choice_table"], {"NCCL_CAR_ALGO": "auto"}),
                         "table:     /cache/m.table (3 rows, digest ab12): the library follows it; the verdict below does")
        self.assertEqual(doctor.table_line({"used": False, "why": "no table for this machine"}, None),
                         "table:     no table for this machine")

    def test_the_transcript_in_cli_md_is_the_library_s_verdict(self):
        # docs/cli.md shows doctor on 4 GPUs with NVLink and the defaults: its verdict lines are
        # what this build's policy says there, word for word.
        cli_support.query_program(self)
        with open(os.path.join(cli_support.REPO_ROOT, "docs", "cli.md")) as document:
            text = document.read()
        transcript = text[text.index("$ nccl-car doctor\n"):]
        transcript = transcript[:transcript.index("```")].splitlines()
        shown = transcript[next(i for i, line in enumerate(transcript) if line.startswith("verdict:")):]
        with mock.patch("nccl_car_cli.gpu_probe.probe_gpus", return_value=machine(4)):
            report = doctor.collect(argparse.Namespace(lib=None), clean_env())
        lines = doctor.render_text(report).splitlines()
        self.assertEqual(shown, lines[next(i for i, line in enumerate(lines) if line.startswith("verdict:")):])


class NcclSearchTest(unittest.TestCase):
    def test_order(self):
        with tempfile.TemporaryDirectory() as site:
            wheel = os.path.join(site, "nvidia", "nccl", "lib")
            os.makedirs(wheel)
            open(os.path.join(wheel, "libnccl.so.2"), "w").close()
            found = host_probe.nccl_candidates({"NCCL_CAR_NCCL_LIB": "/opt/nccl.so"}, ["/nowhere", site])
        self.assertEqual([source for source, _ in found],
                         ["NCCL_CAR_NCCL_LIB", "the dynamic loader", "a Python wheel (PyTorch's NCCL)",
                          "the CUDA folder"])
        self.assertEqual(found[2][1], os.path.join(wheel, "libnccl.so.2"))

    def test_falls_through_to_the_first_that_loads(self):
        class FakeNccl:
            def ncclGetVersion(self, pointer):
                pointer._obj.value = 22703
                return 0

        loaded = []

        def load(target):
            loaded.append(target)
            if target == host_probe.NCCL_SONAME:
                raise OSError("libnccl.so.2: cannot open shared object file")
            return FakeNccl()

        with tempfile.TemporaryDirectory() as site:
            wheel = os.path.join(site, "nvidia", "nccl", "lib", "libnccl.so.2")
            os.makedirs(os.path.dirname(wheel))
            open(wheel, "w").close()
            result = host_probe.locate_nccl({"NCCL_CAR_NCCL_LIB": "/missing/libnccl.so.2"}, [site], load=load)
        self.assertEqual(loaded, [host_probe.NCCL_SONAME, wheel])
        self.assertEqual((result["path"], result["version"]), (wheel, "2.27.3"))
        self.assertEqual([t["error"] is None for t in result["tried"]], [False, False, True])

    def test_header_version_read_from_the_library(self):
        with tempfile.NamedTemporaryFile() as library:
            library.write(b"\x7fELF\0\0" + b"\0" * 4096 + b"nccl-car: built against nccl.h 2.32.3\0rest")
            library.flush()
            self.assertEqual(host_probe.header_version_of(library.name), "2.32.3")
        self.assertIsNone(host_probe.header_version_of("/nonexistent/libnccl-car.so"))

    def test_the_built_library_names_its_nccl_h(self):
        library = os.path.join(cli_support.BUILD_DIR, "shim", "libnccl-car.so")
        cache = os.path.join(cli_support.BUILD_DIR, "CMakeCache.txt")
        cli_support.require_built(self, library, cache)
        with open(cache) as stream:
            include = next(line.split("=", 1)[1].strip() for line in stream if line.startswith("NCCL_INCLUDE_DIR:"))
        with open(os.path.join(include, "nccl.h")) as header:
            code = int(next(line.split()[2] for line in header if line.startswith("#define NCCL_VERSION_CODE ")))
        self.assertEqual(host_probe.header_version_of(library), host_probe.decode_version(code))

    def test_header_note(self):
        kind, text = host_probe.header_note("2.33.1", "2.32.3")
        self.assertEqual(kind, "warning")
        self.assertIn("the functions NCCL added after 2.32.3 reach NCCL past the library", text)
        self.assertEqual(host_probe.header_note("2.28.9", "2.32.3")[0], "note")
        self.assertEqual(host_probe.header_note("2.9.6", "2.32.3")[0], "note")  # by number, not as text
        self.assertIsNone(host_probe.header_note("2.32.3", "2.32.3"))
        self.assertIsNone(host_probe.header_note(None, "2.32.3"))
        self.assertIsNone(host_probe.header_note("2.32.3", None))

    def test_decode_version(self):
        self.assertEqual(host_probe.decode_version(22809), "2.28.9")
        self.assertEqual(host_probe.decode_version(21903), "2.19.3")
        self.assertEqual(host_probe.decode_version(2804), "2.8.4")


class HostProbeTest(unittest.TestCase):
    def test_mps_control_pipe(self):
        with tempfile.TemporaryDirectory() as pipes:
            self.assertFalse(host_probe.mps_status({"CUDA_MPS_PIPE_DIRECTORY": pipes}, proc_root=pipes)["running"])
            os.mkfifo(os.path.join(pipes, "control"))
            status = host_probe.mps_status({"CUDA_MPS_PIPE_DIRECTORY": pipes}, proc_root=pipes)
        self.assertTrue(status["running"])
        self.assertIn("control pipe", status["evidence"])

    def test_mps_control_process(self):
        with tempfile.TemporaryDirectory() as proc:
            for pid, argv in (("17", b"/usr/bin/python3\0x.py\0"), ("42", b"/usr/bin/nvidia-cuda-mps-control\0-d\0")):
                os.mkdir(os.path.join(proc, pid))
                with open(os.path.join(proc, pid, "cmdline"), "wb") as cmdline:
                    cmdline.write(argv)
            status = host_probe.mps_status({"CUDA_MPS_PIPE_DIRECTORY": proc}, proc_root=proc)
        self.assertTrue(status["running"])
        self.assertIn("process 42", status["evidence"])

    def test_container_markers(self):
        with tempfile.TemporaryDirectory() as root:
            self.assertIsNone(host_probe.container_evidence({}, root=root))
            self.assertIn("podman", host_probe.container_evidence({"container": "podman"}, root=root))
            os.makedirs(os.path.join(root, "proc", "1"))
            with open(os.path.join(root, "proc", "1", "cgroup"), "w") as cgroup:
                cgroup.write("0::/kubepods/besteffort/pod1234\n")
            self.assertIn("kubepods", host_probe.container_evidence({}, root=root))
            open(os.path.join(root, ".dockerenv"), "w").close()
            self.assertEqual(host_probe.container_evidence({}, root=root), "/.dockerenv exists")


class DoctorCommandTest(unittest.TestCase):
    """On this machine. CUDA_VISIBLE_DEVICES="" hides any GPU, so the answer is the same
    with or without a driver."""

    def test_text_report(self):
        result = run_tool("doctor", "--lib", "/nonexistent/libnccl-car.so",
                          env=clean_env(CUDA_VISIBLE_DEVICES="", NCCL_CAR_ALGO="2stage", NCCL_CAR_MAXBYTES="1"))
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[-1], "verdict: no GPU visible: the library would forward every call to NCCL")
        self.assertIn("library:   /nonexistent/libnccl-car.so (--lib): NOT FOUND", result.stdout)
        self.assertIn("GPUs:      none visible", result.stdout)
        self.assertIn("NCCL_CAR_ALGO=2stage", result.stdout)
        self.assertIn("NCCL_CAR_MAXBYTES is not a variable nccl-car reads", result.stdout)
        for label in ("NCCL:", "MPS:", "IPC:       namespace ipc:["):
            self.assertIn(label, result.stdout)

    def test_json_report(self):
        cli_support.query_program(self)
        result = run_tool("doctor", "--json", env=clean_env(CUDA_VISIBLE_DEVICES=""))
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        self.assertEqual(report["cuda"]["gpus"], [])
        self.assertTrue(report["cuda"]["driver_error"])
        self.assertFalse(report["accelerates"])
        self.assertTrue(report["verdict"].startswith("verdict: no GPU visible"))
        self.assertEqual(report["library"]["source"], "default")
        self.assertEqual(report["settings"]["effective"]["NCCL_CAR_MAX_BYTES"], 8 << 20)
        self.assertEqual(report["settings"]["checked_by"], cli_support.QUERY_PROGRAM)
        self.assertIn("open_files_soft", report["ipc"])

    def test_without_the_query_program(self):
        result = run_tool("doctor", env=clean_env(CUDA_VISIBLE_DEVICES="", NCCL_CAR_QUERY="/nonexistent/query",
                                                  NCCL_CAR_MAX_BYTES="8M"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("settings:  NCCL_CAR_MAX_BYTES=8M\n    values not checked: the query program is not built "
                      "(no /nonexistent/query, from NCCL_CAR_QUERY)", result.stdout)
        self.assertEqual(result.stdout.splitlines()[-1],
                         "verdict: no GPU visible: the library would forward every call to NCCL")

    @unittest.skipUnless(shutil.which("cc"), "needs a C compiler to build a stand-in libnccl.so.2")
    def test_nccl_from_the_variable(self):
        with tempfile.TemporaryDirectory() as folder:
            source = os.path.join(folder, "fake.c")
            library = os.path.join(folder, "libnccl.so.2")
            with open(source, "w") as stream:
                stream.write("int ncclGetVersion(int* version) { *version = 21903; return 0; }\n")
            subprocess.run(["cc", "-shared", "-fPIC", "-o", library, source], check=True)
            result = run_tool("doctor", "--json", env=clean_env(CUDA_VISIBLE_DEVICES="", NCCL_CAR_NCCL_LIB=library))
        nccl = json.loads(result.stdout)["nccl"]
        self.assertEqual((nccl["path"], nccl["source"], nccl["version"]), (library, "NCCL_CAR_NCCL_LIB", "2.19.3"))

    @unittest.skipUnless(shutil.which("cc"), "needs a C compiler to build a stand-in libnccl.so.2")
    def test_a_real_nccl_newer_than_the_header_is_warned_about(self):
        with tempfile.TemporaryDirectory() as folder:
            source = os.path.join(folder, "fake.c")
            library = os.path.join(folder, "libnccl.so.2")
            ours = os.path.join(folder, "libnccl-car.so")
            with open(source, "w") as stream:
                stream.write("int ncclGetVersion(int* version) { *version = 23203; return 0; }\n")
            subprocess.run(["cc", "-shared", "-fPIC", "-o", library, source], check=True)
            with open(ours, "wb") as stream:
                stream.write(b"\0" * 64 + b"nccl-car: built against nccl.h 2.28.9\0")
            result = run_tool("doctor", "--lib", ours,
                              env=clean_env(CUDA_VISIBLE_DEVICES="", NCCL_CAR_NCCL_LIB=library))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"NCCL:      {library} (via NCCL_CAR_NCCL_LIB), version 2.32.3; libnccl-car.so built "
                      "against nccl.h 2.28.9\n", result.stdout)
        self.assertIn("    warning: NCCL 2.32.3 is newer than the nccl.h 2.28.9 libnccl-car.so was built against",
                      result.stdout)


if __name__ == "__main__":
    unittest.main()
