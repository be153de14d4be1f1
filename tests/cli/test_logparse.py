"""The library's log lines, added up over communicators and processes.

The lines are the library's own: `nccl_car_query log-samples` makes them with the formatter
every writer uses (plugin/log_format.h) and says what each was made from, so a change of
format on either side fails here. Expected totals are computed from those facts."""

import os
import unittest
from collections import Counter

import cli_support
from nccl_car_cli.logparse import LogTally

# Lines of other programs, between the library's.
NOISE = ["NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", "step 10 loss 2.31", "h:1:2 [0] NCCL WARN not ours", ""]
# mpirun --tag-output puts this before every line of one rank.
LAUNCHER_PREFIX = "[1,1]<stderr>:"


def tally_of(lines):
    tally = LogTally()
    for line in lines:
        tally.feed(line + "\n")
    return tally


class LogSamplesTest(unittest.TestCase):
    def setUp(self):
        query = cli_support.query_program(self)
        self.samples = query.log_samples()
        self.policy = query.policy({})

    def of(self, *kinds):
        return [sample for sample in self.samples if sample["kind"] in kinds]

    def job_output(self, samples=None):
        """The samples as one job's stderr: one process's lines behind a launcher's prefix,
        other programs' lines in between."""
        second_pid = self.of("setup-eligible")[1]["pid"]
        lines = []
        for index, sample in enumerate(self.samples if samples is None else samples):
            lines.append((LAUNCHER_PREFIX if sample["pid"] == second_pid else "") + sample["line"])
            lines.append(NOISE[index % len(NOISE)])
        return lines

    def test_every_kind_the_parser_reads_is_sampled(self):
        self.assertEqual({sample["kind"] for sample in self.samples},
                         {"real-nccl-found", "setup-eligible", "setup-not-eligible", "warn", "taken-call",
                          "released", "alive-at-exit", "audit-served"})
        self.assertEqual(len({(s["host"], s["pid"]) for s in self.of("setup-eligible")}), 2)

    def test_sums_over_communicators_and_processes(self):
        tally = tally_of(self.job_output())
        setups = self.of("setup-eligible", "setup-not-eligible")
        released = self.of("released", "alive-at-exit")  # counted alike
        self.assertEqual(tally.library_lines, len(self.samples))
        self.assertEqual(tally.processes, {(s["host"], str(s["pid"])) for s in self.samples})
        self.assertEqual(tally.setups, len(setups))
        self.assertEqual(tally.communicators, sum(1 for s in setups if s["rank"] == 0))
        self.assertEqual(tally.eligible, len(self.of("setup-eligible")))
        self.assertEqual(tally.not_eligible, Counter(s["reason"] for s in self.of("setup-not-eligible")))
        self.assertEqual(tally.releases, len(self.of("released")))
        self.assertEqual(tally.alive_at_exit, len(self.of("alive-at-exit")))
        self.assertEqual(tally.taken, sum((Counter(s["taken"]) for s in released), Counter()))
        self.assertEqual(tally.taken_bytes, sum(s["bytes"] for s in released))
        self.assertEqual(tally.forwarded, sum(sum(s["forwarded"].values()) for s in released))
        self.assertEqual(tally.forward_reasons, sum((Counter(s["forwarded"]) for s in released), Counter()))
        self.assertEqual(tally.traced, Counter(s["kernel"] for s in self.of("taken-call")))
        self.assertEqual(tally.warnings, [f"{os.path.basename(s['file'])}:{s['source_line']}: {s['text']}"
                                          for s in self.of("warn")])
        self.assertEqual(tally.real_nccl_found, len(self.of("real-nccl-found")))
        self.assertEqual(tally.audit_served, len(self.of("audit-served")))
        self.assertEqual(tally.never_released, 0)
        self.assertEqual(tally.not_understood, [])

    def test_every_kernel_and_reason_the_library_names_is_read(self):
        tally = tally_of(self.job_output())
        self.assertEqual(set(tally.taken), set(self.policy["algorithms"]))
        self.assertEqual(set(tally.forward_reasons), set(self.policy["forward_reasons"]))
        self.assertTrue(all(tally.forward_reasons.values()))
        self.assertEqual({s["type"] for s in self.of("taken-call")}, {t["name"] for t in self.policy["element_types"]})

    def test_each_release_keeps_its_own_counts(self):
        tally = tally_of(self.job_output())
        self.assertEqual([dict(taken) for taken in tally.released],
                         [s["taken"] for s in self.of("released", "alive-at-exit")])

    def test_summary_text(self):
        tally = tally_of(self.job_output())
        summary = "\n".join(tally.summary_lines())
        setups = self.of("setup-eligible", "setup-not-eligible")
        processes = {(s["host"], s["pid"]) for s in self.samples}
        self.assertIn(f"nccl-car: {len(processes)} process(es); {tally.communicators} communicator(s), "
                      f"{len(setups)} communicator rank(s) set up: {len(self.of('setup-eligible'))} eligible, "
                      f"{len(self.of('setup-not-eligible'))} not eligible", summary)
        for sample in self.of("setup-not-eligible"):
            self.assertIn(f"not eligible (1 rank(s)): {sample['reason']}", summary)
        # The kernels in the library's own order, every one of them.
        per_kernel = ", ".join(f"{kernel} {count}" for kernel, count in tally.taken.items())
        self.assertIn(f"taken: {tally.taken_calls} call(s) ({per_kernel}), ", summary)
        self.assertIn(f"({tally.taken_bytes} bytes), counted on every rank", summary)
        reasons = ", ".join(f"{reason} {count}" for reason, count in
                            sorted(tally.forward_reasons.items(), key=lambda item: (-item[1], item[0])))
        self.assertIn(f"forwarded to NCCL: {tally.forwarded} call(s) ({reasons})", summary)
        self.assertIn(f"WARN lines: {len(self.of('warn'))}", summary)

    def test_the_links_of_each_setup_that_names_them_and_whether_pcie_was_measured(self):
        """Eligible lines name their links; so does a PCIe communicator's that nothing measured,
        which is not eligible (its calls all go to NCCL, untuned) but a PCIe case all the same:
        what nccl-car tune's probe learns a world size's case from."""
        tally = tally_of(self.job_output())
        eligible = self.of("setup-eligible")
        untuned = [s for s in self.of("setup-not-eligible") if s["links"]]
        self.assertEqual(len(untuned), 1)
        self.assertTrue(untuned[0]["reason"].startswith("pcie untuned ("))
        self.assertEqual(tally.links, Counter(s["links"] for s in eligible + untuned))
        self.assertEqual(set(tally.links), {"nvlink", "pcie"})
        self.assertEqual(tally.pcie_untuned, len(untuned))
        # An eligible PCIe communicator without a measured table (NCCL_CAR_ALGO forced a kernel)
        # is not untuned.
        self.assertTrue(any(s["pcie_tuned"] is False for s in eligible))
        only_forced = tally_of(s["line"] for s in eligible if s["pcie_tuned"] is False)
        self.assertEqual((only_forced.links["pcie"], only_forced.pcie_untuned), (1, 0))
        # The not-eligible line names the command, once per rank, among the reasons.
        self.assertIn(f"not eligible (1 rank(s)): {untuned[0]['reason']}", "\n".join(tally.summary_lines()))
        self.assertIn("until `nccl-car tune` has measured", untuned[0]["reason"])
        # Another reason names no links.
        other = tally_of(s["line"] for s in self.of("setup-not-eligible") if not s["links"])
        self.assertEqual((sum(other.links.values()), other.pcie_untuned), (0, 0))

    def test_forwarded_zero_has_no_reasons(self):
        nothing = [s for s in self.of("released") if not s["forwarded"]]
        self.assertTrue(nothing)
        tally = tally_of(sample["line"] for sample in nothing)
        self.assertEqual((tally.releases, tally.forwarded), (len(nothing), 0))
        self.assertEqual(tally.taken_calls, sum(sum(s["taken"].values()) for s in nothing))
        self.assertIn("forwarded to NCCL: 0 call(s)\n", "\n".join(tally.summary_lines()) + "\n")

    def test_setups_never_released_are_reported(self):
        unreleased = [s for s in self.samples if s["kind"] not in ("released", "alive-at-exit")]
        tally = tally_of(self.job_output(unreleased))
        self.assertEqual(tally.never_released, len(self.of("setup-eligible", "setup-not-eligible")))
        self.assertIn("no communicator was released", "\n".join(tally.summary_lines()))
        one_left = [s for s in self.samples if s is not self.of("released")[-1]]
        partly = tally_of(self.job_output(one_left))
        self.assertEqual(partly.never_released, 1)
        self.assertIn("1 communicator rank(s) never released nor seen at exit", "\n".join(partly.summary_lines()))

    def test_communicators_alive_at_exit_are_counted_and_said(self):
        """JAX never destroys its communicators: their lines at exit are what counts them."""
        at_exit = self.of("alive-at-exit")
        self.assertTrue(at_exit)
        only = [s for s in self.samples if s["kind"] != "released"]
        tally = tally_of(self.job_output(only))
        self.assertEqual((tally.releases, tally.alive_at_exit), (0, len(at_exit)))
        self.assertEqual(tally.taken, sum((Counter(s["taken"]) for s in at_exit), Counter()))
        self.assertEqual(tally.taken_bytes, sum(s["bytes"] for s in at_exit))
        self.assertEqual(tally.forward_reasons, sum((Counter(s["forwarded"]) for s in at_exit), Counter()))
        summary = "\n".join(tally.summary_lines())
        self.assertIn(f"taken: {sum(sum(s['taken'].values()) for s in at_exit)} call(s)", summary)
        self.assertIn(f"  {len(at_exit)} communicator rank(s) alive at exit (never destroyed)", summary)
        self.assertNotIn("no communicator was released", summary)

    def test_comm_address_reused_by_another_process_is_separate(self):
        setup = self.of("setup-eligible")[0]
        release = next(s for s in self.of("released") if (s["pid"], s["rank"]) == (setup["pid"], setup["rank"]))
        # The same communicator and rank, in a process of another id: not released by that line.
        other = setup["line"].replace(f"{setup['host']}:{setup['pid']}:", f"{setup['host']}:{setup['pid'] + 1}:", 1)
        self.assertNotEqual(other, setup["line"])
        self.assertEqual(tally_of([setup["line"], other, release["line"]]).never_released, 1)

    def test_no_library_line(self):
        tally = tally_of(NOISE)
        self.assertEqual(tally.library_lines, 0)
        self.assertEqual(tally.summary_lines(), [
            "nccl-car: no NCCL-CAR line was seen: the library was not loaded, or the program "
            "made no NCCL calls"])
        # Library lines, but no released: line to name the kernels.
        found = "\n".join(tally_of([self.of("real-nccl-found")[0]["line"]]).summary_lines())
        self.assertIn("  taken: 0 call(s), 0 B (0 bytes), counted on every rank", found)

    def test_unknown_format_is_flagged_not_counted(self):
        line = self.of("released")[0]["line"]
        changed = line[:line.index("released: ") + len("released: ")] + "took 5 calls"
        tally = tally_of([changed])
        self.assertEqual((tally.releases, tally.taken_calls), (0, 0))
        self.assertEqual(tally.not_understood, [changed])
        self.assertIn("not understood", "\n".join(tally.summary_lines()))

    def test_call_lines_of_older_libraries_without_the_op_still_count(self):
        calls = [s for s in self.of("taken-call") if s["op"] is not None]  # an all-gather's line has none
        older = [s["line"].replace(f" x {s['type']} {s['op']} (", f" x {s['type']} (") for s in calls]
        self.assertTrue(all(line != s["line"] for line, s in zip(older, calls)))
        self.assertEqual(tally_of(older).traced, Counter(s["kernel"] for s in calls))
        self.assertEqual(tally_of(older).taken_calls, 0)  # released: lines alone count as taken


if __name__ == "__main__":
    unittest.main()
