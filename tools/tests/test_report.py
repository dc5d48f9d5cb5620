import json
import os
import tempfile
import unittest

from benchlib import parse, report
from tests import fixtures


def sample(driver, qd, iops, irqs=None, rep=1, rate=0, workload="randread"):
    return {"driver": driver, "workload": workload, "qd": qd, "jobs": 1, "cpus": "1", "ctrls": 1, "rep": rep,
            "rate": rate, "iops": iops, "irqs_per_io": irqs, "interrupts_per_io": irqs}


def key(qd, driver, rate=0):
    return ("randread", "1", 1, qd, rate, driver)


class Summary(unittest.TestCase):
    def test_median_and_spread_over_repetitions(self):
        s = report.summarize([sample("stock", 32, v, rep=i) for i, v in enumerate((100, 300, 200))])
        iops = s[key(32, "stock")]["iops"]
        self.assertEqual((iops["median"], iops["min"], iops["max"], iops["n"]), (200, 100, 300, 3))
        self.assertAlmostEqual(iops["spread"], 2.0)

    def test_spread_needs_two_repetitions_and_a_nonzero_minimum(self):
        s = report.summarize([sample("stock", 1, 100, irqs=0.0), sample("stock-poll", 1, 100, irqs=0.0, rep=1),
                              sample("stock-poll", 1, 103, irqs=0.0, rep=2)])
        self.assertIsNone(s[key(1, "stock")]["iops"]["spread"])
        self.assertAlmostEqual(s[key(1, "stock-poll")]["iops"]["spread"], 0.03)
        self.assertIsNone(s[key(1, "stock-poll")]["irqs_per_io"]["spread"])

    def test_equal_load_cells_are_cells_of_their_own(self):
        s = report.summarize([sample("stock", 32, 1000), sample("stock", 32, 250, rate=25)])
        self.assertEqual(s[key(32, "stock")]["iops"]["median"], 1000)
        self.assertEqual(s[key(32, "stock", 25)]["iops"]["median"], 250)

    def test_missing_metric_is_left_out(self):
        s = report.summarize([sample("stock", 1, 100)])
        self.assertNotIn("irqs_per_io", s[key(1, "stock")])

    def test_ratio_to_stock_in_the_same_cell(self):
        s = report.summarize([sample("stock", 32, 100, 0.5), sample("adaptive-on", 32, 120, 0.1),
                              sample("adaptive-on", 16, 50, 0.2)])
        self.assertAlmostEqual(report.ratio(s, key(32, "adaptive-on"), "iops"), 1.2)
        self.assertAlmostEqual(report.ratio(s, key(32, "adaptive-on"), "irqs_per_io"), 0.2)
        self.assertIsNone(report.ratio(s, key(16, "adaptive-on"), "iops"))

    def test_ratio_with_zero_baseline_is_none(self):
        s = report.summarize([sample("stock", 32, 0), sample("adaptive-on", 32, 10)])
        self.assertIsNone(report.ratio(s, key(32, "adaptive-on"), "iops"))


class Table(unittest.TestCase):
    def test_rows_per_driver_with_ratio_column(self):
        text = fixtures.bench_output([("stock", 32, 1000, 500, 0, 0, 0, 5), ("adaptive-on", 32, 1500, 10, 100, 7000, 7500, 5)])
        samples, _, _ = parse.parse_log(text)
        md = report.markdown(report.summarize(samples))
        rows = [l for l in md.splitlines() if l.startswith("| 32 |")]
        self.assertEqual(len(rows), 2)
        stock = [c.strip() for c in rows[0].split("|")]
        adaptive = [c.strip() for c in rows[1].split("|")]
        self.assertEqual(stock[2], "nvme (interrupts)")
        self.assertEqual(stock[5], "1.00")
        self.assertEqual(adaptive[2], "nvme_adaptive, adaptive on")
        self.assertEqual(adaptive[5], "1.50")
        self.assertEqual(adaptive[-2], "93%")
        self.assertTrue(md.startswith("### randread, 1 job on CPU 1, 1 controller"))

    def test_spread_columns_and_the_precision_line(self):
        samples = [sample("stock", 32, 1000, 0.5, rep=1), sample("stock", 32, 1020, 0.5, rep=2),
                   sample("adaptive-on", 32, 1000, 0.10, rep=1), sample("adaptive-on", 32, 1100, 0.11, rep=2)]
        md = report.markdown(report.summarize(samples))
        stock, adaptive = [[c.strip() for c in l.split("|")] for l in md.splitlines() if l.startswith("| 32 |")]
        self.assertEqual((stock[4], stock[12]), ("2.0%", "0.0%"))
        self.assertEqual((adaptive[4], adaptive[12]), ("10.0%", "10.0%"))
        self.assertIn("1 of 2 cells within 3% for both IOPS and interrupts per I/O; widest 10.0% (IOPS), 10.0%", md)
        noted = report.markdown(report.summarize(samples), note="Host-timed: why.")
        self.assertTrue(noted.rstrip().endswith("(interrupts per I/O).\n\nHost-timed: why."), "the note follows the spread")

    def test_peak_and_equal_load_tables(self):
        samples = [sample("stock", 128, 50000, 0.04, workload="peak"), sample("stock-poll", 128, 60000, 0.0, workload="peak"),
                   sample("stock", 32, 10000, 0.4), sample("stock", 32, 2500, 1.0, rate=25),
                   sample("adaptive-on", 32, 2500, 0.5, rate=25)]
        for s in samples:
            s.update(lat_p9999_us=900.0, lat_max_us=1200.0, rate_iops=2500 if s["rate"] else None)
        md = report.markdown(report.summarize(samples))
        self.assertIn("### peak: t/io_uring -d128 -s32 -c32 -b4096 -B1 -F1, 1 job on CPU 1, 1 controller", md)
        peak = [[c.strip() for c in l.split("|")] for l in md.splitlines() if l.startswith("| 128 |")]
        self.assertEqual([(r[2], r[3], r[6]) for r in peak], [("nvme (interrupts)", "-p0", "1.00"),
                                                               ("nvme poll_queues + hipri", "-p1", "1.20")])
        self.assertIn("### Equal-load latency: randread, 1 job on CPU 1, 1 controller, QD 32 "
                      "(stock's IOPS at QD 32: 10000 = 100%)", md)
        rate = [[c.strip() for c in l.split("|")] for l in md.splitlines() if l.startswith("| 25% |")]
        self.assertEqual([(r[2], r[3], r[8], r[9], r[13]) for r in rate],
                         [("nvme (interrupts)", "2500", "900", "1200", "1.00"), ("nvme_adaptive, adaptive on", "2500", "900", "1200", "0.50")])

    def test_comparison_across_runs(self):
        on = report.summarize([sample("stock", 1, 100, 1.0), sample("adaptive-off", 1, 90, 1.0)])
        off = report.summarize([sample("stock", 1, 100, 1.0), sample("adaptive-off", 1, 99, 0.9)])
        text = report.comparison([("virtualized", on), ("bare", off)])
        self.assertIn("| randread QD 1, 1 job on CPU 1, 1 ctrl | nvme_adaptive, adaptive off | 0.90 (–) | 1.00 | 0.99 (–) | 0.90 |",
                      text)


class Histogram(unittest.TestCase):
    def test_cdf_on_a_nines_scale(self):
        xs, ys = report.cdf_points({1000: 90, 2000: 9, 3000: 1})
        self.assertEqual(xs, [1.0, 2.0])
        self.assertAlmostEqual(ys[0], 1.0)
        self.assertAlmostEqual(ys[1], 2.0)

    def test_bins_pool_over_repetitions(self):
        a, b = sample("stock", 32, 1, rate=50), sample("stock", 32, 1, rate=50, rep=2)
        a["_bins"], b["_bins"] = {1000: 2, 2000: 1}, {1000: 1}
        self.assertEqual(report.pooled_bins([a, b], key(32, "stock", 50)), {1000: 3, 2000: 1})

    def test_plot_names_keep_the_usual_placements_short(self):
        self.assertEqual(report.plot_name("randread", "1", 1), "randread-j1-c1.png")
        self.assertEqual(report.plot_name("randread", "0,1", 2), "randread-j2-c2.png")
        self.assertEqual(report.plot_name("peak", "0", 1), "peak-j1-c1-cpu0.png")


class Outputs(unittest.TestCase):
    def test_json_keeps_samples_and_environment(self):
        samples = [sample("stock", 1, 10), sample("adaptive-on", 1, 12)]
        samples[0]["_bins"] = {1: 1}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "results.json")
            report.to_json(samples, report.summarize(samples), {"kernel": "7.3.4"}, path)
            with open(path) as f:
                doc = json.load(f)
            with open(path) as f:
                self.assertEqual(report.load_env(f), {"kernel": "7.3.4"})
        self.assertEqual(len(doc["samples"]), 2)
        self.assertNotIn("_bins", doc["samples"][0], "histograms stay in the raw fio files")
        ratios = {e["driver"]: e["iops_ratio_to_stock"] for e in doc["summary"]}
        self.assertAlmostEqual(ratios["adaptive-on"], 1.2)


    def test_every_raw_output_gets_its_own_file(self):
        text = fixtures.bench_output([("stock", 32, 1000, 500, 0, 0, 0, 5), ("adaptive-on", 32, 1500, 10, 100, 7000, 7500, 5)])
        samples, _, _ = parse.parse_log(text)
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(report.write_raw(samples, d), 2)
            names = sorted(os.listdir(d))
            self.assertEqual(names, ["fio-randread-qd32-cpu1-c1-adaptive-on-rep1.json", "fio-randread-qd32-cpu1-c1-stock-rep1.json"])
            with open(os.path.join(d, names[1])) as f:
                self.assertEqual(json.load(f)["jobs"][0]["read"]["iops"], 1000)
        self.assertEqual(samples[0]["raw_file"], names[1])
        self.assertEqual(report.raw_name(dict(samples[0], tool="t-io_uring", workload="peak", qd=128, cpus="0,1", rate=0)),
                         "io_uring-peak-qd128-cpu0+1-c1-stock-rep1.txt")
        self.assertEqual(report.raw_name(dict(samples[0], rate=50)), "fio-randread-qd32-cpu1-c1-stock-load50-rep1.json")


if __name__ == "__main__":
    unittest.main()
