"""bench's rows (medians, spread, NCCL's best, ratios, checks), the table and verdict, the CSV,
and the reading of car_nccl_bench's output and of NCCL's tuning log."""

import csv
import os
import tempfile
import unittest

import cli_support  # noqa: F401  (puts tools/ on sys.path)
from nccl_car_cli import bench_runs
from nccl_car_cli.bench_drivers import CHECKED_EVERY, CHECKED_NONE, CHECKED_ONCE, CarNcclBench, Sample, nccl_choices
from nccl_car_cli.bench_report import fields, format_tables, verdict_lines, write_csv
from nccl_car_cli.bench_results import any_wrong, not_checked, rows_of, slower_than_best, without_car_time
from nccl_car_cli.bench_runs import Job

# The rows and tables do not depend on which kernel a variant forces: one variant of a
# kernel named "1shot" stands for any.
CONFIGS = bench_runs.chosen(["car-1shot"], lambda: ("1shot",))


def samples_of(times, dtype="half", mode="model-graph", wrong=0, op="sum", workload="plain", checked=CHECKED_EVERY):
    """times: {config: {size: [microseconds, ...]}}."""
    return [Sample(dtype, op, mode, workload, size, config, t, wrong, checked)
            for config, per_size in times.items() for size, values in per_size.items() for t in values]


def rows(samples, modes=("model-graph",), choices=None, dtypes=("half",), workloads=("plain",)):
    return rows_of(samples, choices or {}, CONFIGS, list(dtypes), ["sum"], list(workloads), list(modes))


class RowsTest(unittest.TestCase):
    def test_medians_spread_best_and_ratios(self):
        row, = rows(samples_of({"nccl": {1024: [10, 30, 20]}, "nccl-R2": {1024: [9, 9, 50]},
                                "nccl-gm0": {1024: [12]}, "car": {1024: [6, 6, 1]}}))
        self.assertEqual(row.median("nccl"), 20)
        self.assertEqual((row.figures["nccl"].low, row.figures["nccl"].high, row.figures["nccl"].runs), (10, 30, 3))
        self.assertEqual(row.best, ("nccl-R2", 9))
        self.assertIsNone(row.figures["nccl-R2-gm0"])
        self.assertAlmostEqual(row.over_best(), 6 / 9)
        self.assertAlmostEqual(row.over_nccl(), 6 / 20)
        self.assertIsNone(row.over_best("car-1shot"))

    def test_a_tie_goes_to_the_first_configuration_in_the_order(self):
        row, = rows(samples_of({"nccl-R2-gm0": {64: [5]}, "nccl-gm0": {64: [5]}, "nccl": {64: [7]}}))
        self.assertEqual(row.best, ("nccl-gm0", 5))

    def test_ours_is_never_the_best(self):
        row, = rows(samples_of({"nccl": {64: [5]}, "car-1shot": {64: [1]}, "car-pdl0": {64: [2]}}))
        self.assertEqual(row.best, ("nccl", 5))

    def test_host_time_against_nccls_best_host_time(self):
        row, = rows(samples_of({"nccl": {64: [10]}, "nccl-gm0": {64: [8]}, "car": {64: [4]}}, mode="host"),
                    modes=("host",))
        self.assertEqual(row.best, ("nccl-gm0", 8))
        self.assertAlmostEqual(row.over_best(), 0.5)

    def test_what_nccl_chose_at_its_best(self):
        choices = {("half", "sum", "nccl", 64): "RING/LL", ("half", "sum", "nccl-R2", 64): "symmetric K"}
        row, = rows(samples_of({"nccl": {64: [5]}, "nccl-R2": {64: [4]}}), choices=choices)
        self.assertEqual(row.best_choice, "symmetric K")
        self.assertEqual(row.choices["nccl"], "RING/LL")

    def test_no_nccl_time(self):
        row, = rows(samples_of({"car": {64: [2]}}))
        self.assertEqual(row.best, (None, None))
        self.assertIsNone(row.over_best())
        self.assertEqual(without_car_time([row]), [])

    def test_wrong_counts_and_the_weakest_check(self):
        samples = samples_of({"nccl": {64: [5, 5]}}, wrong=2) \
            + samples_of({"car": {64: [4]}}, wrong=None, checked=CHECKED_NONE) \
            + [Sample("half", "sum", "model-graph", "plain", 64, "car-1shot", None, 3, CHECKED_EVERY)]
        row, = rows(samples)
        self.assertEqual(row.wrong["nccl"], 4)
        self.assertIsNone(row.wrong["car"])              # never checked: N/A, not 0
        self.assertEqual(row.wrong_total(["car", "car-1shot"]), 3)
        self.assertEqual(row.checked, CHECKED_NONE)      # one configuration unchecked: the row is
        self.assertEqual(row.figures["car-1shot"], None)  # a wrong size has no time
        self.assertTrue(any_wrong([row]))
        self.assertEqual(not_checked([row]), [row])
        once, = rows(samples_of({"nccl": {64: [5]}}, checked=CHECKED_ONCE) + samples_of({"car": {64: [5]}}))
        self.assertEqual(once.checked, CHECKED_ONCE)
        self.assertFalse(any_wrong(rows(samples_of({"nccl": {64: [5]}}))))

    def test_order_workloads_modes_and_sizes(self):
        samples = samples_of({"nccl": {2048: [1], 1024: [1]}}, mode="model-eager") + samples_of({"nccl": {4096: [1]}}) \
            + samples_of({"nccl": {64: [1]}}, workload="in-place")
        got = rows(samples, modes=("model-graph", "model-eager"), workloads=("plain", "in-place"))
        self.assertEqual([(r.workload, r.mode, r.size) for r in got],
                         [("plain", "model-graph", 4096), ("plain", "model-eager", 1024),
                          ("plain", "model-eager", 2048), ("in-place", "model-graph", 64)])
        self.assertEqual(got[0].label, "half sum plain model-graph")

    def test_slower_and_missing(self):
        samples = samples_of({"nccl": {1024: [10], 2048: [10], 4096: [10]}, "car": {1024: [10], 2048: [10.01]}}) \
            + samples_of({"nccl": {1024: [10]}, "car": {1024: [50]}}, mode="host")
        got = rows(samples, modes=("model-graph", "host"))
        self.assertEqual([r.size for r in slower_than_best(got)], [2048])   # equal is not slower; host is not
        self.assertEqual([r.size for r in without_car_time(got)], [4096])


class ReportTest(unittest.TestCase):
    def setUp(self):
        samples = samples_of({"nccl": {1024: [10, 12], 2048: [20]}, "nccl-gm0": {1024: [8, 9], 2048: [16]},
                              "car": {1024: [4, 5], 2048: [17]}, "car-1shot": {1024: [2]}}) \
            + samples_of({"nccl": {1024: [3]}, "car": {1024: [1.5]}}, mode="host") \
            + samples_of({"nccl": {1024: [5]}, "car": {1024: [6]}}, dtype="float", mode="isolated-graph", wrong=None,
                         checked=CHECKED_NONE)
        self.rows = rows(samples, modes=("model-graph", "host", "isolated-graph"), dtypes=("half", "float"),
                         choices={("half", "sum", "nccl-gm0", 1024): "RING/LL"})

    def test_sections_and_columns(self):
        text = format_tables(self.rows, CONFIGS, 2)
        titles = [line.split(":")[0] for line in text.splitlines() if "median and lowest-highest of 2 run(s)" in line]
        self.assertEqual(titles, ["half sum, plain (out of place, one stream), model-graph",
                                  "half sum, plain (out of place, one stream), host",
                                  "float sum, plain (out of place, one stream), isolated-graph"])
        self.assertRegex(text, r"size\s+NCCL\s+NCCL best\s+spread\s+best is\s+NCCL chose\s+nccl-car\s+spread\s+/best"
                               r"\s+car-pdl0\s+spread\s+/best\s+car-1shot\s+spread\s+/best\s+#wrong\s+checked")
        self.assertRegex(text, r"\n\s+1K\s+11\.00\s+8\.50\s+8\.00-9\.00\s+nccl-gm0\s+RING/LL\s+4\.50\s+4\.00-5\.00"
                               r"\s+0\.53\s+-\s+-\s+-\s+2\.00\s+2\.00-2\.00\s+0\.24\s+0\s+every\n")
        self.assertRegex(text, r"\n\s+2K\s+20\.00\s+16\.00\s+16\.00-16\.00\s+nccl-gm0\s+-\s+17\.00")
        self.assertRegex(text, r"\n\s+1K\s+3\.00\s+3\.00\s+3\.00-3\.00\s+nccl\s+-\s+1\.50\s+1\.50-1\.50\s+0\.50")
        self.assertRegex(text, r"\n\s+1K\s+5\.00\s+5\.00\s+5\.00-5\.00\s+nccl\s+-\s+6\.00\s+6\.00-6\.00\s+1\.20.*N/A\s+NO")

    def test_verdict(self):
        self.assertEqual(verdict_lines(self.rows),
                         ["nccl-car is SLOWER than NCCL's best at: half sum plain model-graph 2K (1.062x, best nccl-gm0); "
                          "float sum plain isolated-graph 1K (1.200x, best nccl)",
                          "NOT CHECKED (their outputs were never compared): float sum plain isolated-graph 1K"])
        self.assertEqual(verdict_lines(self.rows[:1]),
                         ["nccl-car is not slower than NCCL's best at any of the 1 row(s) measured with both"])
        self.assertEqual(verdict_lines([]), ["no size was measured with both NCCL and nccl-car"])


class CsvTest(unittest.TestCase):
    def test_one_row_per_size_with_every_configuration(self):
        got = rows(samples_of({"nccl": {1024: [10]}, "nccl-R2": {1024: [5, 7]}, "car": {1024: [4]}}),
                   choices={("half", "sum", "nccl-R2", 1024): "symmetric K"})
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "out.csv")
            write_csv(path, got, CONFIGS)
            with open(path, newline="") as stream:
                reader = csv.DictReader(stream)
                self.assertEqual(tuple(reader.fieldnames), fields(CONFIGS))
                row, = list(reader)
        self.assertEqual((row["dtype"], row["op"], row["workload"], row["mode"], row["size_bytes"]),
                         ("half", "sum", "plain", "model-graph", "1024"))
        self.assertEqual((row["nccl_us"], row["nccl-R2_us"], row["nccl-R2_low_us"], row["nccl-R2_high_us"],
                          row["nccl-gm0_us"]), ("10", "6", "5", "7", ""))
        self.assertEqual((row["nccl_best_us"], row["nccl_best_config"], row["nccl_choice"]), ("6", "nccl-R2", "symmetric K"))
        self.assertEqual((row["car_over_nccl_best"], row["car_over_nccl"], row["checked"]), ("0.666667", "0.4", "every"))
        self.assertEqual((row["car_wrong"], row["nccl-gm0_wrong"], row["car_runs"], row["nccl-gm0_runs"]),
                         ("0", "", "1", "0"))


CAR_NCCL_BENCH = CarNcclBench("car_nccl_bench", [1024], ["model"], ["plain"], 2)


class CarNcclBenchOutputTest(unittest.TestCase):
    JOB = Job(bench_runs.CAR, "bfloat16", "sum", None, 0)

    def test_rows_among_other_lines(self):
        output = ("# car_nccl_bench: 2 ranks, one process each, on 2 GPUs, NCCL 22809\n"
                  "mode,workload,bytes,us,checked,wrong,samples_us\n"
                  "gpu-node:41528:41528 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
                  "probe,plain,1024,,1,0,\n"
                  "model-graph,plain,1024,5.120,15,0,5.1;5.2\n"
                  "host,two-streams,1024,3.100,15,0,3.1\n"
                  "isolated-eager,in-place,2048,8.5,0,0,8.5\n"
                  "model-graph,plain,4096,8.9\n")
        result = CAR_NCCL_BENCH.parse(self.JOB, output, "")
        self.assertIsNone(result.problem)
        self.assertEqual([(s.mode, s.workload, s.size, s.time_us, s.wrong, s.checked) for s in result.samples],
                         [("model-graph", "plain", 1024, 5.12, 0, "every"), ("host", "two-streams", 1024, 3.1, 0, "every"),
                          ("isolated-eager", "in-place", 2048, 8.5, None, "no")])
        self.assertEqual({(s.config, s.dtype, s.op) for s in result.samples}, {("car", "bfloat16", "sum")})

    def test_wrong_rows(self):
        result = CAR_NCCL_BENCH.parse(self.JOB, "probe,plain,2048,,1,17,\nmodel-eager,plain,2048,4.0,15,51,4\n", "")
        self.assertEqual(result.problem, "wrong results at 2048 bytes probe plain (17 element(s)), "
                                         "2048 bytes model-eager plain (51 element(s))")
        self.assertEqual([(s.mode, s.wrong) for s in result.samples], [("model-eager", 51)])

    def test_nothing_measured(self):
        result = CAR_NCCL_BENCH.parse(self.JOB, "car_nccl_bench: needs 2 or more GPUs, or --one-gpu (found 1 GPUs)\n", "")
        self.assertEqual((result.samples, result.problem), ([], "printed no result rows"))

    def test_the_program_of_before_the_modes(self):
        result = CAR_NCCL_BENCH.parse(self.JOB, "bytes,eager_us,graph_us,host_us\n1024,8.12,5.40,3.10\n"
                                              "# wrong: 2048 bytes, 17 element(s) differ on the worst rank\n", "")
        self.assertEqual([(s.mode, s.size, s.time_us, s.wrong, s.checked) for s in result.samples],
                         [("chain-eager", 1024, 8.12, 0, "once"), ("chain-graph", 1024, 5.40, None, "no"),
                          ("host", 1024, 3.10, None, "no"), ("chain-eager", 2048, None, 17, "once")])
        self.assertEqual(result.problem, "wrong results at 2048 bytes chain-eager plain (17 element(s))")


class TuningLogTest(unittest.TestCase):
    def test_choices_per_size(self):
        log = ("h:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}\n"
               "h:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}\n"
               "h:1:1 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n"
               "h:1:1 [0] NCCL INFO AllReduce: 8 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..0}\n"
               "h:1:1 [0] NCCL INFO AllReduce [Symmetric]: 65536 Bytes -> Kernel AllReduce_AGxLL_R nchannels 4 "
               "nthreads 512 nWorks 1\n"
               "h:1:1 [0] NCCL INFO Channel 00/02 : 0 1\n")
        self.assertEqual(nccl_choices(log), {1024: "RING/LL", 8: "RING/LL+TREE/LL",
                                             65536: "symmetric AllReduce_AGxLL_R"})

    def test_only_the_collective_measured(self):
        log = ("h:1:1 [0] NCCL INFO AllReduce: 4 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n"
               "h:1:1 [0] NCCL INFO AllGather: 2048 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}\n"
               "h:1:1 [0] NCCL INFO ReduceScatter [Symmetric]: 4096 Bytes -> Kernel ReduceScatter_LL nchannels 2\n")
        self.assertEqual(nccl_choices(log, "all-gather"), {2048: "RING/SIMPLE"})
        self.assertEqual(nccl_choices(log, "reduce-scatter"), {4096: "symmetric ReduceScatter_LL"})
        self.assertEqual(nccl_choices(log), {4: "RING/LL"})
        gather = CarNcclBench("car_nccl_bench", [2048], ["model"], ["plain"], 2, collective="all-gather")
        probe = Job(bench_runs.NCCL_CONFIGS[0], "bfloat16", "sum", None, -1, True)
        self.assertEqual(gather.parse(probe, "probe,plain,2048,,1,0,\n", log).choices, {2048: "RING/SIMPLE"})

    def test_a_probe_reads_them_a_timed_run_does_not(self):
        log = "h:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}\n"
        probe = Job(bench_runs.NCCL_CONFIGS[0], "bfloat16", "sum", None, -1, True)
        self.assertEqual(CAR_NCCL_BENCH.parse(probe, "probe,plain,1024,,1,0,\n", log).choices, {1024: "RING/LL"})
        self.assertEqual(CAR_NCCL_BENCH.parse(CarNcclBenchOutputTest.JOB, "probe,plain,1024,,1,0,\n", log).choices, {})


if __name__ == "__main__":
    unittest.main()
