"""bench's rows (medians, NCCL's best, ratios), the table and verdict, CSV and SVG, and the
reading of car_nccl_bench's output."""

import csv
import os
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree

import cli_support  # noqa: F401  (puts tools/ on sys.path)
from nccl_car_cli import bench_configs, driver_car_nccl_bench
from nccl_car_cli.bench_plan import Job
from nccl_car_cli.bench_report import format_tables, verdict_lines
from nccl_car_cli.csv_table import fields, write_csv
from nccl_car_cli.results import Sample, any_wrong, rows_of, slower_than_best, without_car_time
from nccl_car_cli.svg_chart import render_svg

SVG = "{http://www.w3.org/2000/svg}"
CONFIGS = bench_configs.chosen(["car-1shot"])


def samples_of(times, dtype="half", mode="eager", wrong=0, op="sum"):
    """times: {config: {size: [microseconds, ...]}}."""
    return [Sample(dtype, op, mode, size, config, t, wrong)
            for config, per_size in times.items() for size, values in per_size.items() for t in values]


class RowsTest(unittest.TestCase):
    def rows(self, samples, modes=("eager",)):
        return rows_of(samples, CONFIGS, ["half"], ["sum"], list(modes))

    def test_medians_best_and_ratios(self):
        row, = self.rows(samples_of({"nccl": {1024: [10, 30, 20]}, "nccl-R2": {1024: [9, 9, 50]},
                                     "nccl-gm0": {1024: [12]}, "car": {1024: [6, 6, 1]}}))
        self.assertEqual(row.medians["nccl"], 20)
        self.assertEqual(row.best, ("nccl-R2", 9))
        self.assertIsNone(row.medians["nccl-R2-gm0"])
        self.assertEqual((row.runs["nccl"], row.runs["nccl-R2-gm0"]), (3, 0))
        self.assertAlmostEqual(row.over_best(), 6 / 9)
        self.assertAlmostEqual(row.over_nccl(), 6 / 20)
        self.assertIsNone(row.over_best("car-1shot"))

    def test_a_tie_goes_to_the_first_configuration_in_the_order(self):
        row, = self.rows(samples_of({"nccl-R2-gm0": {64: [5]}, "nccl-gm0": {64: [5]}, "nccl": {64: [7]}}))
        self.assertEqual(row.best, ("nccl-gm0", 5))

    def test_car_variants_are_never_the_best(self):
        row, = self.rows(samples_of({"nccl": {64: [5]}, "car-1shot": {64: [1]}, "car": {64: [2]}}))
        self.assertEqual(row.best, ("nccl", 5))

    def test_no_nccl_time(self):
        row, = self.rows(samples_of({"car": {64: [2]}}))
        self.assertEqual(row.best, (None, None))
        self.assertIsNone(row.over_best())
        self.assertEqual(without_car_time([row]), [])

    def test_wrong_counts(self):
        samples = samples_of({"nccl": {64: [5, 5]}}, wrong=2) + samples_of({"car": {64: [4]}}, wrong=None) \
            + [Sample("half", "sum", "eager", 64, "car-1shot", None, 3)]
        row, = self.rows(samples)
        self.assertEqual(row.wrong["nccl"], 4)
        self.assertIsNone(row.wrong["car"])              # never checked: N/A, not 0
        self.assertEqual(row.wrong_total(["car", "car-1shot"]), 3)
        self.assertIsNone(row.wrong_total(["car"]))
        self.assertEqual(row.runs["car-1shot"], 0)       # a wrong size has no time
        self.assertTrue(any_wrong([row]))
        self.assertFalse(any_wrong(self.rows(samples_of({"nccl": {64: [5]}}))))

    def test_order_sizes_and_modes(self):
        samples = samples_of({"nccl": {2048: [1], 1024: [1]}}, mode="graph") + samples_of({"nccl": {4096: [1]}})
        rows = rows_of(samples, CONFIGS, ["half"], ["sum"], ["eager", "graph"])
        self.assertEqual([(r.mode, r.size) for r in rows], [("eager", 4096), ("graph", 1024), ("graph", 2048)])
        self.assertEqual(rows_of(samples, CONFIGS, ["half"], ["sum"], ["eager"])[0].size, 4096)

    def test_ops_are_kept_apart_in_the_order_given(self):
        samples = samples_of({"nccl": {64: [5]}, "car": {64: [4]}}) \
            + samples_of({"nccl": {64: [50]}, "car": {64: [40]}}, op="prod") + samples_of({"nccl": {64: [1]}}, op="max")
        rows = rows_of(samples, CONFIGS, ["half"], ["prod", "sum"], ["eager"])
        self.assertEqual([(r.op, r.medians["nccl"], r.medians["car"], r.label) for r in rows],
                         [("prod", 50, 40, "half prod eager"), ("sum", 5, 4, "half sum eager")])

    def test_slower_and_missing(self):
        samples = samples_of({"nccl": {1024: [10], 2048: [10], 4096: [10]}, "car": {1024: [10], 2048: [10.01]}}) \
            + samples_of({"nccl": {1024: [10]}, "car": {1024: [50]}}, mode="host")
        rows = rows_of(samples, CONFIGS, ["half"], ["sum"], ["eager", "host"])
        self.assertEqual([r.size for r in slower_than_best(rows)], [2048])   # equal is not slower; host is not
        self.assertEqual([r.size for r in without_car_time(rows)], [4096])


class ReportTest(unittest.TestCase):
    def setUp(self):
        samples = samples_of({"nccl": {1024: [10], 2048: [20]}, "nccl-gm0": {1024: [8], 2048: [16]},
                              "car": {1024: [4], 2048: [17]}, "car-1shot": {1024: [2]}}) \
            + samples_of({"nccl": {1024: [3]}, "car": {1024: [1.5]}}, mode="host") \
            + samples_of({"nccl": {1024: [5]}, "car": {1024: [6]}}, dtype="float", mode="graph", wrong=None)
        self.rows = rows_of(samples, CONFIGS, ["half", "float"], ["sum"], ["eager", "graph", "host"])

    def test_sections_and_columns(self):
        text = format_tables(self.rows, CONFIGS)
        self.assertEqual([line for line in text.splitlines() if line.endswith("(us)")],
                         ["half sum eager: time per all-reduce (us)", "half sum host: time to issue one eager call (us)",
                          "float sum graph: time per all-reduce (us)"])
        self.assertRegex(text, r"size\s+NCCL\s+NCCL best\s+best is\s+nccl-car\s+car/best\s+car-1shot\s+/best\s+"
                               r"#wrong NCCL\s+#wrong car")
        self.assertRegex(text, r"\n\s+1K\s+10\.00\s+8\.00\s+nccl-gm0\s+4\.00\s+0\.50\s+2\.00\s+0\.25\s+0\s+0\n")
        self.assertRegex(text, r"\n\s+2K\s+20\.00\s+16\.00\s+nccl-gm0\s+17\.00\s+1\.06\s+-\s+-\s+0\s+0\n")
        self.assertRegex(text, r"size\s+NCCL\s+nccl-car\s+car/NCCL\s+car-1shot\s+/NCCL\n")
        self.assertRegex(text, r"\n\s+1K\s+3\.00\s+1\.50\s+0\.50\s+-\s+-\n")
        self.assertRegex(text, r"\n\s+1K\s+5\.00\s+5\.00\s+nccl\s+6\.00\s+1\.20\s+-\s+-\s+N/A\s+N/A")

    def test_verdict(self):
        self.assertEqual(verdict_lines(self.rows),
                         ["nccl-car is SLOWER than NCCL's best at: half sum eager 2K (1.062x, best nccl-gm0); "
                          "float sum graph 1K (1.200x, best nccl)"])
        self.assertEqual(verdict_lines(self.rows[:1]),
                         ["nccl-car is not slower than NCCL's best at any of the 1 size(s) measured with both"])
        self.assertEqual(verdict_lines([]), ["no size was measured with both NCCL and nccl-car"])


class CsvTest(unittest.TestCase):
    def test_one_row_per_size_with_every_configuration(self):
        rows = rows_of(samples_of({"nccl": {1024: [10]}, "nccl-R2": {1024: [5]}, "car": {1024: [4]}}),
                       CONFIGS, ["half"], ["sum"], ["eager"])
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "out.csv")
            write_csv(path, rows, CONFIGS, "out-of-place")
            with open(path, newline="") as stream:
                reader = csv.DictReader(stream)
                self.assertEqual(tuple(reader.fieldnames), fields(CONFIGS))
                row, = list(reader)
        self.assertEqual((row["dtype"], row["op"], row["mode"], row["place"], row["size_bytes"]),
                         ("half", "sum", "eager", "out-of-place", "1024"))
        self.assertEqual((row["nccl_us"], row["nccl-R2_us"], row["nccl-gm0_us"], row["car-1shot_us"]),
                         ("10", "5", "", ""))
        self.assertEqual((row["nccl_best_us"], row["nccl_best_config"]), ("5", "nccl-R2"))
        self.assertEqual((row["car_over_nccl_best"], row["car_over_nccl"]), ("0.8", "0.4"))
        self.assertEqual((row["car_wrong"], row["nccl-gm0_wrong"], row["car_runs"], row["nccl-gm0_runs"]),
                         ("0", "", "1", "0"))


class SvgTest(unittest.TestCase):
    def render(self, samples, modes=("eager", "graph", "host")):
        return ElementTree.fromstring(render_svg(rows_of(samples, CONFIGS, ["half", "float"], ["sum"], list(modes)), "a < b"))

    def test_panels_and_lines(self):
        samples = samples_of({"nccl": {1024: [10], 8192: [20]}, "car": {1024: [4], 8192: [30]}}) \
            + samples_of({"nccl": {1024: [10], 8192: [20]}, "car": {1024: [4]}}, dtype="float", mode="graph") \
            + samples_of({"nccl": {1024: [3], 8192: [3]}, "car": {1024: [1], 8192: [1]}}, mode="host")
        root = self.render(samples)
        self.assertEqual(root.get("width"), "1440")   # three panels: the host time is there
        lines = root.findall(f".//{SVG}polyline")
        # half sum eager: best, car, ratio; float sum graph: best, car (one point, still drawn), ratio; host: 2.
        self.assertEqual(len(lines), 8)
        self.assertEqual(sum(1 for line in lines if line.get("stroke-dasharray")), 3)
        texts = [t.text for t in root.iter(SVG + "text")]
        for label in ("half sum eager", "float sum graph", "half sum host", "a < b", "nccl-car", "1K", "8K"):
            self.assertIn(label, texts)
        for line in lines:
            for point in line.get("points").split():
                x, y = map(float, point.split(","))
                self.assertTrue(0 <= x <= 1440 and 0 <= y <= 470, point)

    def test_two_panels_without_host_times(self):
        root = self.render(samples_of({"nccl": {1024: [10]}, "car": {1024: [4]}}), modes=("eager",))
        self.assertEqual(root.get("width"), "960")
        self.assertEqual(len(root.findall(f".//{SVG}polyline")), 3)

    def test_latency_falls_upwards_as_sizes_grow(self):
        root = self.render(samples_of({"nccl": {1024: [1], 2048: [10], 4096: [100]}}), modes=("eager",))
        best = root.findall(f".//{SVG}polyline")[0]
        ys = [float(p.split(",")[1]) for p in best.get("points").split()]
        self.assertEqual(ys, sorted(ys, reverse=True))  # SVG y grows downwards

    def test_no_data(self):
        root = self.render([])
        self.assertEqual(root.findall(f".//{SVG}polyline"), [])
        self.assertTrue(any("no data" in (t.text or "") for t in root.iter(SVG + "text")))


class CarNcclBenchOutputTest(unittest.TestCase):
    JOB = Job(bench_configs.CAR, "bfloat16", "sum", None, 0)

    def test_rows_among_other_lines(self):
        output = ("# car_nccl_bench: 2 GPUs, one process each, NCCL 22807, cudaMalloc buffers\n"
                  "bytes,eager_us,graph_us,host_us\n"
                  "gpu-node:41528:41528 [0] NCCL INFO NCCL version 2.28.7+cuda13.0\n"
                  "1024,8.12,5.40,3.10\n"
                  "2048,8.50,5.61,3.02\n"
                  "4096,8.9\n")
        samples, problem = driver_car_nccl_bench.parse(self.JOB, output)
        self.assertIsNone(problem)
        self.assertEqual([(s.mode, s.size, s.time_us, s.wrong) for s in samples[:3]],
                         [("eager", 1024, 8.12, 0), ("graph", 1024, 5.40, 0), ("host", 1024, 3.10, 0)])
        self.assertEqual(len(samples), 6)
        self.assertEqual({(s.config, s.dtype, s.op) for s in samples}, {("car", "bfloat16", "sum")})

    def test_wrong_size(self):
        samples, problem = driver_car_nccl_bench.parse(
            self.JOB, "bytes,eager_us,graph_us,host_us\n1024,8.12,5.40,3.10\n"
                      "# wrong: 2048 bytes, 17 element(s) differ on the worst rank\n")
        self.assertEqual(problem, "wrong result at 2048 bytes (17 element(s))")
        self.assertEqual((samples[-1].size, samples[-1].time_us, samples[-1].wrong), (2048, None, 17))

    def test_nothing_measured(self):
        samples, problem = driver_car_nccl_bench.parse(
            self.JOB, "car_nccl_bench: needs 2 or more GPUs (found 1); nothing measured\n")
        self.assertEqual((samples, problem), ([], "printed no result rows"))


if __name__ == "__main__":
    unittest.main()
