"""Sizes, the NCCL_CAR_* settings as the library reads them, the argparse types and
LD_PRELOAD handling."""

import argparse
import os
import unittest

import cli_support
from nccl_car_cli import bench_drivers, library_query, options, paths
from nccl_car_cli.errors import UsageError
from nccl_car_cli.units import format_size, parse_size, short_size


class ParseSizeTest(unittest.TestCase):
    def test_suffixes_are_binary(self):
        self.assertEqual(parse_size("1024"), 1024)
        self.assertEqual(parse_size("512K"), 512 << 10)
        self.assertEqual(parse_size("8M"), 8 << 20)
        self.assertEqual(parse_size("1G"), 1 << 30)

    def test_spellings(self):
        self.assertEqual(parse_size("8m"), 8 << 20)
        self.assertEqual(parse_size("8MiB"), 8 << 20)
        self.assertEqual(parse_size("8MB"), 8 << 20)
        self.assertEqual(parse_size("16B"), 16)
        self.assertEqual(parse_size(" 4 K "), 4 << 10)

    def test_rejects(self):
        for text in ("", "-1", "1.5M", "8X", "M", "8 M M", "0x10", "1T"):
            with self.subTest(text=text), self.assertRaises(ValueError):
                parse_size(text)

    def test_format(self):
        self.assertEqual(format_size(8 << 20), "8 MiB")
        self.assertEqual(format_size(1536), "1.5 KiB")
        self.assertEqual(format_size(100), "100 B")
        self.assertEqual(short_size(16 << 20), "16M")
        self.assertEqual(short_size(1 << 10), "1K")
        self.assertEqual(short_size(1000), "1000")


class ArgumentTypesTest(unittest.TestCase):
    def test_sizes(self):
        self.assertEqual(options.size("512K"), 512 << 10)
        self.assertEqual(options.size("17"), 17)  # whether the library takes it is the library's call
        for text in ("lots", "-1"):
            with self.subTest(text=text), self.assertRaises(argparse.ArgumentTypeError):
                options.size(text)

    def test_int_between(self):
        parse = options.int_between(1, 36)
        self.assertEqual(parse("36"), 36)
        for text in ("0", "37", "x", "1.5"):
            with self.subTest(text=text), self.assertRaises(argparse.ArgumentTypeError):
                parse(text)


class EffectiveSettingsTest(unittest.TestCase):
    """What the library itself makes of an environment, through this build's query program."""

    def setUp(self):
        self.query = cli_support.query_program(self)

    def effective(self, env):
        return library_query.effective_settings(env, self.query)

    def test_defaults(self):
        effective = self.effective({})
        self.assertTrue(effective["checked"])
        values = effective["values"]
        self.assertEqual((values["NCCL_CAR_MAX_BYTES"], values["NCCL_CAR_MAX_BLOCKS"], values["NCCL_CAR_ALGO"],
                          values["NCCL_CAR_COPY_IN_KERNEL_BYTES"]), (8 << 20, 256, "auto", 512 << 10))
        self.assertIs(values["NCCL_CAR_DISABLE"], False)
        self.assertIsNone(values["NCCL_CAR_NCCL_LIB"])
        self.assertEqual(effective["problems"], [])

    def test_valid_values(self):
        values = self.effective({
            "NCCL_CAR_DISABLE": "Yes", "NCCL_CAR_ALGO": "2STAGE", "NCCL_CAR_MAX_BYTES": "1048576",
            "NCCL_CAR_MAX_BLOCKS": "8", "NCCL_CAR_DEBUG": "info", "NCCL_CAR_COPY_IN_KERNEL_BYTES": "0",
            "NCCL_CAR_DEBUG_FILE": "/tmp/car.%p.log"})["values"]
        self.assertEqual(values["NCCL_CAR_COPY_IN_KERNEL_BYTES"], 0)
        self.assertIs(values["NCCL_CAR_DISABLE"], True)
        self.assertEqual(values["NCCL_CAR_ALGO"], "2stage")
        self.assertEqual(values["NCCL_CAR_MAX_BYTES"], 1 << 20)
        self.assertEqual(values["NCCL_CAR_MAX_BLOCKS"], 8)
        self.assertEqual(values["NCCL_CAR_DEBUG"], "INFO")
        self.assertEqual(values["NCCL_CAR_DEBUG_FILE"], "/tmp/car.%p.log")

    def test_bad_values_keep_defaults_and_are_named(self):
        effective = self.effective({
            "NCCL_CAR_MAX_BYTES": "8M", "NCCL_CAR_MAX_BLOCKS": "400", "NCCL_CAR_ALGO": "fast",
            "NCCL_CAR_DISABLE": "maybe", "NCCL_CAR_MAXBYTES": "1", "NCCL_CAR_COPY_IN_KERNEL_BYTES": "1M",
            "NCCL_CAR_LIB": "/x/libnccl-car.so", "NCCL_CAR_QUERY": self.query.path})
        values = effective["values"]
        self.assertEqual(values["NCCL_CAR_MAX_BYTES"], 8 << 20)
        self.assertEqual(values["NCCL_CAR_COPY_IN_KERNEL_BYTES"], 512 << 10)
        self.assertEqual(values["NCCL_CAR_MAX_BLOCKS"], 256)
        self.assertEqual(values["NCCL_CAR_ALGO"], "auto")
        problems = "\n".join(effective["problems"])
        self.assertIn("invalid value '8M' for NCCL_CAR_MAX_BYTES (expected 16 to 1073741824 bytes, a multiple "
                      "of 16), using default 8388608", problems)
        for name in ("NCCL_CAR_MAX_BLOCKS", "NCCL_CAR_ALGO", "NCCL_CAR_DISABLE",
                     "NCCL_CAR_MAXBYTES is not a variable", "NCCL_CAR_COPY_IN_KERNEL_BYTES"):
            self.assertIn(name, problems)
        # The tool's own variables are no typo.
        self.assertEqual(len(effective["problems"]), 6)

    def test_any_text_survives_the_json(self):
        text = 'a"b\\c\n\td\x01e \u00e9'
        rows = {row["name"]: row for row in self.query.settings({"NCCL_CAR_DEBUG_FILE": text})["settings"]}
        self.assertEqual(rows["NCCL_CAR_DEBUG_FILE"]["set"], text)
        self.assertEqual(rows["NCCL_CAR_DEBUG_FILE"]["value"], text)

    def test_options_the_library_would_ignore_are_refused_in_its_words(self):
        self.assertIsNone(library_query.refuse_ignored({"NCCL_CAR_ALGO": "1shot"}, {"NCCL_CAR_QUERY": self.query.path},
                                                  None))
        with self.assertRaises(UsageError) as refused:
            library_query.refuse_ignored({"NCCL_CAR_MAX_BLOCKS": "257", "NCCL_CAR_ALGO": "2stage"},
                                    {"NCCL_CAR_QUERY": self.query.path}, None)
        self.assertEqual(str(refused.exception), "the library would ignore it: invalid value '257' for "
                                                 "NCCL_CAR_MAX_BLOCKS (expected 1 to 256), using default 256")

    def test_at_least_info(self):
        self.assertEqual(library_query.at_least_info(None), "INFO")
        self.assertEqual(library_query.at_least_info("WARN"), "INFO")
        self.assertEqual(library_query.at_least_info("trace"), "TRACE")


class PolicyTest(unittest.TestCase):
    """What the policy works with and takes, as the query program reads it off the library."""

    def setUp(self):
        self.query = cli_support.query_program(self)
        self.policy = self.query.policy({})

    def test_names_match_what_bench_passes_to_the_library(self):
        # Two owners of the same names (bench's table for car_nccl_bench, the library's enums).
        self.assertEqual({t["name"] for t in self.policy["element_types"]}, set(bench_drivers.LIBRARY_NAMES.values()))
        self.assertEqual(self.policy["ops"], list(bench_drivers.OPS))
        self.assertEqual(self.policy["collectives"], ["all-reduce", "all-gather", "reduce-scatter"])
        self.assertGreaterEqual(self.policy["max_ranks"], 2)

    def test_every_type_and_op_is_taken_where_the_library_serves(self):
        every_type = [t["name"] for t in self.policy["element_types"]]
        taken = self.query.decide({}, 2, True, 90, [16], "bf16")["taken"]
        self.assertEqual(list(taken), self.policy["collectives"])
        for collective, answer in taken.items():
            with self.subTest(collective=collective):
                self.assertEqual(answer["types"], every_type)
        # The all-gather takes no op; the others every op.
        self.assertEqual([answer["ops"] for answer in taken.values()], [self.policy["ops"], None, self.policy["ops"]])
        # Older GPUs: a subset (NCCL itself refuses some types there), never more.
        older = self.query.decide({}, 2, True, 80, [16], "bf16")["taken"]
        for collective in taken:
            self.assertLess(set(older[collective]["types"]), set(every_type))
        disabled = self.query.decide({"NCCL_CAR_DISABLE": "1"}, 2, True, 90, [16], "bf16")["taken"]
        self.assertEqual([answer["types"] for answer in disabled.values()], [[]] * len(taken))
        # Where the policy serves no communicator: nothing.
        beyond = self.query.decide({}, self.policy["max_ranks"] + 1, True, 90, [16], "bf16")["taken"]
        self.assertEqual([answer["ops"] for answer in beyond.values()], [[], None, []])
        self.assertEqual([answer["types"] for answer in beyond.values()], [[]] * len(taken))

    def test_each_collective_is_asked_on_its_own(self):
        # A collective switched off takes nothing while the others still take every type: the
        # answer is each collective's own, not the all-reduce's repeated.
        every_type = [t["name"] for t in self.policy["element_types"]]
        for variable, off in (("NCCL_CAR_ALLGATHER_MAX_BYTES", "all-gather"),
                              ("NCCL_CAR_REDUCESCATTER_MAX_BYTES", "reduce-scatter")):
            with self.subTest(variable=variable):
                taken = self.query.decide({variable: "0"}, 2, True, 90, [16], "bf16")["taken"]
                self.assertEqual({collective: answer["types"] for collective, answer in taken.items()},
                                 {collective: [] if collective == off else every_type for collective in taken})
        # An op the library has no kernel for: the reducing collectives take nothing, the
        # all-gather (which reads no op) every type.
        taken = self.query.decide({}, 2, True, 90, [16], "bf16")
        other_op = self.query._ask(["decide", "--ranks", "2", "--full-nvlink", "--compute-capability", "90",
                                    "--op", "other", "16"], {})["taken"]
        self.assertEqual({collective: answer["types"] for collective, answer in other_op.items()},
                         {"all-reduce": [], "all-gather": every_type, "reduce-scatter": []})
        self.assertEqual(taken["taken"]["all-gather"], other_op["all-gather"])


class WithoutQueryProgramTest(unittest.TestCase):
    """A checkout without a build: the values go unchecked, and the reports say so."""

    ENV = {"NCCL_CAR_QUERY": "/nonexistent/nccl_car_query", "NCCL_CAR_MAX_BYTES": "8M"}

    def test_effective_settings_say_why(self):
        query, unavailable = library_query.find(self.ENV)
        self.assertIsNone(query)
        effective = library_query.effective_settings(self.ENV, query, unavailable)
        self.assertFalse(effective["checked"])
        self.assertIsNone(effective["values"])
        self.assertIn("the query program is not built (no /nonexistent/nccl_car_query, from NCCL_CAR_QUERY)",
                      effective["message"])
        self.assertIn("scripts/build.sh builds it", effective["message"])

    def test_options_go_through_with_a_note(self):
        note = library_query.refuse_ignored({"NCCL_CAR_MAX_BYTES": "17"}, self.ENV, None)
        self.assertTrue(note.startswith("option values not checked: the query program is not built"))

    def test_found_beside_the_library_first(self):
        cli_support.require_built(self, cli_support.QUERY_PROGRAM)
        path, how = library_query.locate({}, os.path.join(cli_support.BUILD_DIR, "shim", "libnccl-car.so"))
        self.assertEqual((path, how), (cli_support.QUERY_PROGRAM, "the library's build or install folder"))
        self.assertEqual(library_query.locate({}, "/elsewhere/shim/libnccl-car.so"),
                         (library_query.DEFAULT_PROGRAM, "default"))


class PreloadTest(unittest.TestCase):
    LIB = "/opt/car/libnccl-car.so"

    def test_library_goes_first_once(self):
        self.assertEqual(paths.preload_with(None, self.LIB), self.LIB)
        self.assertEqual(paths.preload_with("/a.so:/b.so", self.LIB), f"{self.LIB}:/a.so:/b.so")
        self.assertEqual(paths.preload_with("/a.so /old/libnccl-car.so", self.LIB), f"{self.LIB}:/a.so")

    def test_baseline_drops_every_copy(self):
        self.assertEqual(paths.preload_without(f"/a.so:{self.LIB}:/x/libnccl-car.so", self.LIB), "/a.so")
        self.assertEqual(paths.preload_without(self.LIB, self.LIB), "")

    def test_library_location_order(self):
        self.assertEqual(paths.library_location("/x/lib.so", {"NCCL_CAR_LIB": "/y.so"}), ("/x/lib.so", "--lib"))
        self.assertEqual(paths.library_location(None, {"NCCL_CAR_LIB": "/y.so"}), ("/y.so", "NCCL_CAR_LIB"))
        self.assertEqual(paths.library_location(None, {}), (paths.DEFAULT_LIBRARY, "default"))
        self.assertTrue(paths.DEFAULT_LIBRARY.endswith("/build/shim/libnccl-car.so"))
        self.assertEqual(paths.REPO_ROOT, cli_support.REPO_ROOT)


if __name__ == "__main__":
    unittest.main()
