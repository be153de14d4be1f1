"""Sizes, the NCCL_CAR_* checks, the argparse types and LD_PRELOAD handling."""

import argparse
import unittest

import cli_support  # noqa: F401  (puts tools/ on sys.path)
from nccl_car_cli import options, paths, settings
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
    def test_library_max_bytes_follows_the_library(self):
        self.assertEqual(options.library_max_bytes("512K"), 512 << 10)
        self.assertEqual(options.library_max_bytes("1G"), 1 << 30)
        for text in ("17", "8", "2G", "0", "lots"):
            with self.subTest(text=text), self.assertRaises(argparse.ArgumentTypeError):
                options.library_max_bytes(text)

    def test_int_between(self):
        parse = options.int_between(1, 36)
        self.assertEqual(parse("36"), 36)
        for text in ("0", "37", "x", "1.5"):
            with self.subTest(text=text), self.assertRaises(argparse.ArgumentTypeError):
                parse(text)

    def test_debug_level_any_case(self):
        self.assertEqual(options.debug_level("trace"), "TRACE")
        with self.assertRaises(argparse.ArgumentTypeError):
            options.debug_level("LOUD")


class EffectiveSettingsTest(unittest.TestCase):
    def test_defaults(self):
        effective = settings.effective_settings({})
        self.assertEqual((effective["max_bytes"], effective["max_blocks"], effective["algo"],
                          effective["copy_in_kernel_bytes"]), (8 << 20, 128, "auto", 512 << 10))
        self.assertFalse(effective["disable"])
        self.assertEqual(effective["problems"], [])

    def test_valid_values(self):
        effective = settings.effective_settings({
            "NCCL_CAR_DISABLE": "Yes", "NCCL_CAR_ALGO": "2STAGE", "NCCL_CAR_MAX_BYTES": "1048576",
            "NCCL_CAR_MAX_BLOCKS": "8", "NCCL_CAR_DEBUG": "info", "NCCL_CAR_COPY_IN_KERNEL_BYTES": "0"})
        self.assertEqual(effective["copy_in_kernel_bytes"], 0)
        self.assertTrue(effective["disable"])
        self.assertEqual(effective["algo"], "2stage")
        self.assertEqual(effective["max_bytes"], 1 << 20)
        self.assertEqual(effective["max_blocks"], 8)
        self.assertEqual(effective["debug"], "INFO")
        self.assertEqual(effective["problems"], [])

    def test_bad_values_keep_defaults_and_are_named(self):
        # As plugin/config.cc: suffixes, signs and out-of-range values are ignored.
        effective = settings.effective_settings({
            "NCCL_CAR_MAX_BYTES": "8M", "NCCL_CAR_MAX_BLOCKS": "400", "NCCL_CAR_ALGO": "fast",
            "NCCL_CAR_DISABLE": "maybe", "NCCL_CAR_MAXBYTES": "1",
            "NCCL_CAR_COPY_IN_KERNEL_BYTES": "1M"})
        self.assertEqual(effective["max_bytes"], 8 << 20)
        self.assertEqual(effective["copy_in_kernel_bytes"], 512 << 10)
        self.assertEqual(effective["max_blocks"], 128)
        self.assertEqual(effective["algo"], "auto")
        problems = "\n".join(effective["problems"])
        for name in ("NCCL_CAR_MAX_BYTES", "NCCL_CAR_MAX_BLOCKS", "NCCL_CAR_ALGO",
                     "NCCL_CAR_DISABLE", "NCCL_CAR_MAXBYTES is not a variable",
                     "NCCL_CAR_COPY_IN_KERNEL_BYTES"):
            self.assertIn(name, problems)
        self.assertEqual(len(effective["problems"]), 6)

    def test_at_least_info(self):
        self.assertEqual(settings.at_least_info(None), "INFO")
        self.assertEqual(settings.at_least_info("WARN"), "INFO")
        self.assertEqual(settings.at_least_info("trace"), "TRACE")


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
