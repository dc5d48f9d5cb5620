import json
import os
import tempfile
import unittest

from benchlib import parse, report
from tests import fixtures


def sample(driver, qd, iops, irqs=None, rep=1):
    return {"driver": driver, "workload": "randread", "qd": qd, "jobs": 1, "ctrls": 1, "rep": rep,
            "iops": iops, "irqs_per_io": irqs}


class Summary(unittest.TestCase):
    def test_median_and_spread_over_repetitions(self):
        s = report.summarize([sample("stock", 32, v, rep=i) for i, v in enumerate((100, 300, 200))])
        iops = s[("randread", 1, 1, 32, "stock")]["iops"]
        self.assertEqual((iops["median"], iops["min"], iops["max"], iops["n"]), (200, 100, 300, 3))

    def test_missing_metric_is_left_out(self):
        s = report.summarize([sample("stock", 1, 100)])
        self.assertNotIn("irqs_per_io", s[("randread", 1, 1, 1, "stock")])

    def test_ratio_to_stock_in_the_same_cell(self):
        s = report.summarize([sample("stock", 32, 100, 0.5), sample("adaptive-on", 32, 120, 0.1),
                              sample("adaptive-on", 16, 50, 0.2)])
        self.assertAlmostEqual(report.ratio(s, ("randread", 1, 1, 32, "adaptive-on"), "iops"), 1.2)
        self.assertAlmostEqual(report.ratio(s, ("randread", 1, 1, 32, "adaptive-on"), "irqs_per_io"), 0.2)
        self.assertIsNone(report.ratio(s, ("randread", 1, 1, 16, "adaptive-on"), "iops"))

    def test_ratio_with_zero_baseline_is_none(self):
        s = report.summarize([sample("stock", 32, 0), sample("adaptive-on", 32, 10)])
        self.assertIsNone(report.ratio(s, ("randread", 1, 1, 32, "adaptive-on"), "iops"))


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
        self.assertEqual(stock[4], "1.00")
        self.assertEqual(adaptive[2], "nvme_adaptive, adaptive on")
        self.assertEqual(adaptive[4], "1.50")
        self.assertEqual(adaptive[-2], "93%")
        self.assertTrue(md.startswith("### randread, 1 job, 1 controller"))


class Outputs(unittest.TestCase):
    def test_json_keeps_samples_and_environment(self):
        samples = [sample("stock", 1, 10), sample("adaptive-on", 1, 12)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "results.json")
            report.to_json(samples, report.summarize(samples), {"kernel": "7.3.4"}, path)
            with open(path) as f:
                doc = json.load(f)
            with open(path) as f:
                self.assertEqual(report.load_env(f), {"kernel": "7.3.4"})
        self.assertEqual(len(doc["samples"]), 2)
        ratios = {e["driver"]: e["iops_ratio_to_stock"] for e in doc["summary"]}
        self.assertAlmostEqual(ratios["adaptive-on"], 1.2)


if __name__ == "__main__":
    unittest.main()
