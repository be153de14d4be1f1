"""Medians of the runs, and the CSV and SVG files made from them."""

import csv
import os
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

import cli_support  # noqa: F401  (puts tools/ on sys.path)
from nccl_car_cli.csv_table import FIELDS, write_csv
from nccl_car_cli.nccl_tests import PerfOutput, PerfRow, Timing
from nccl_car_cli.results import Comparison, Samples, any_wrong, format_table
from nccl_car_cli.svg_chart import render_svg, write_svg

SVG = "{http://www.w3.org/2000/svg}"


def output_of(times, wrong=0, in_place_offset=100.0):
    """A parsed run with one row per (size, out-of-place time)."""
    return PerfOutput(rows=[PerfRow(size, size // 2, "half", "sum", -1,
                                    Timing(t, 1.0, 2.0 * t, wrong), Timing(t + in_place_offset, 1.0, 1.0, wrong))
                            for size, t in times.items()])


class SamplesTest(unittest.TestCase):
    def setUp(self):
        self.samples = Samples()
        for nccl, car in ((10.0, 5.0), (30.0, 100.0), (20.0, 6.0)):
            self.samples.add("half", "eager", False, output_of({1024: nccl, 2048: 2 * nccl}), in_place=False)
            self.samples.add("half", "eager", True, output_of({1024: car, 2048: 2 * car}), in_place=False)

    def test_medians_and_speedup(self):
        rows = self.samples.compare(["half"], ["eager"])
        self.assertEqual([(r.size, r.nccl_us, r.car_us) for r in rows], [(1024, 20.0, 6.0), (2048, 40.0, 12.0)])
        self.assertAlmostEqual(rows[0].speedup, 20.0 / 6.0)
        self.assertEqual(rows[0].nccl_busbw, 40.0)
        self.assertEqual((rows[0].nccl_runs, rows[0].car_runs), (3, 3))
        self.assertEqual((rows[0].nccl_wrong, rows[0].car_wrong), (0, 0))
        self.assertFalse(any_wrong(rows))

    def test_in_place_columns(self):
        samples = Samples()
        samples.add("float", "graph", False, output_of({64: 1.0}), in_place=True)
        samples.add("float", "graph", True, output_of({64: 3.0}), in_place=True)
        row, = samples.compare(["float"], ["graph"])
        self.assertEqual((row.nccl_us, row.car_us), (101.0, 103.0))

    def test_missing_side_and_wrong_counts(self):
        self.samples.add("half", "eager", True, output_of({1024: 7.0, 4096: 1.0}, wrong=2), in_place=False)
        self.samples.add("half", "eager", False, output_of({1024: 9.0}, wrong=None), in_place=False)
        rows = self.samples.compare(["half"], ["eager"])
        self.assertEqual([r.size for r in rows], [1024, 2048, 4096])
        self.assertEqual(rows[0].car_wrong, 2)
        self.assertEqual(rows[0].nccl_wrong, 0)  # the unchecked run adds nothing
        self.assertIsNone(rows[2].nccl_us)
        self.assertIsNone(rows[2].speedup)
        self.assertTrue(any_wrong(rows))
        table = format_table(rows)
        self.assertIn("4K", table)
        self.assertRegex(table, r"half\s+eager\s+4K\s+-\s+1\.00\s+-")

    def test_order_follows_the_options(self):
        self.samples.add("float", "eager", False, output_of({1024: 1.0}), in_place=False)
        rows = self.samples.compare(["float", "half"], ["eager"])
        self.assertEqual([r.dtype for r in rows], ["float", "half", "half"])


def comparisons():
    rows = []
    for dtype, mode, factor in (("half", "eager", 1.0), ("bfloat16", "graph", 0.5)):
        for size in (1024, 2048, 4096, 8192):
            rows.append(Comparison(dtype, mode, size, 10.0 * factor * size / 1024, 4.0 * factor * size / 1024,
                                   1.0, 2.0, 0, 0, 3, 3))
    rows.append(Comparison("float", "eager", 1024, 12.0, None, 1.0, None, 0, None, 3, 0))
    return rows


class CsvTest(unittest.TestCase):
    def test_round_trip(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "out.csv")
            write_csv(path, comparisons(), "out-of-place")
            with open(path, newline="") as stream:
                reader = csv.DictReader(stream)
                self.assertEqual(tuple(reader.fieldnames), FIELDS)
                rows = list(reader)
        self.assertEqual(len(rows), 9)
        self.assertEqual(rows[1]["size_bytes"], "2048")
        self.assertEqual(float(rows[1]["nccl_us"]), 20.0)
        self.assertEqual(float(rows[1]["speedup"]), 2.5)
        self.assertEqual(rows[1]["place"], "out-of-place")
        self.assertEqual(rows[8]["nccl_car_us"], "")
        self.assertEqual(rows[8]["speedup"], "")
        self.assertEqual(rows[8]["nccl_car_runs"], "0")


class SvgTest(unittest.TestCase):
    def test_well_formed_with_a_line_per_series(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "chart.svg")
            write_svg(path, comparisons(), "all-reduce <median> & co")
            root = ElementTree.parse(path).getroot()
        self.assertEqual(root.tag, SVG + "svg")
        lines = root.findall(f".//{SVG}polyline")
        # 3 series; "float" has no nccl-car points, so: 2 x (NCCL, nccl-car, speedup) + 1 NCCL.
        self.assertEqual(len(lines), 7)
        self.assertEqual(sum(1 for line in lines if line.get("stroke-dasharray")), 3)
        texts = [t.text for t in root.iter(SVG + "text")]
        for label in ("half eager", "bfloat16 graph", "float eager", "1K", "8K", "nccl-car", "NCCL",
                      "all-reduce <median> & co"):
            self.assertIn(label, texts)
        for line in lines:
            for point in line.get("points").split():
                x, y = map(float, point.split(","))
                self.assertTrue(0 <= x <= 1000 and 0 <= y <= 470, point)

    def test_latency_rises_with_size(self):
        root = ElementTree.fromstring(render_svg(comparisons()[:4], "t"))
        nccl = root.findall(f".//{SVG}polyline")[0]
        ys = [float(p.split(",")[1]) for p in nccl.get("points").split()]
        self.assertEqual(ys, sorted(ys, reverse=True))  # SVG y grows downwards

    def test_no_data(self):
        root = ElementTree.fromstring(render_svg([], "nothing"))
        self.assertEqual(root.findall(f".//{SVG}polyline"), [])
        self.assertTrue(any("no data" in (t.text or "") for t in root.iter(SVG + "text")))

    def test_single_size(self):
        root = ElementTree.fromstring(render_svg(comparisons()[:1], "one"))
        self.assertEqual(len(root.findall(f".//{SVG}polyline")), 3)


if __name__ == "__main__":
    unittest.main()
