import json
import unittest

from benchlib import parse
from tests import fixtures


class FioFigures(unittest.TestCase):
    def test_read_workload(self):
        f = parse.fio_figures(fixtures.fio_json(iops=1234.5, ios=6000), "randread")
        self.assertEqual(f["iops"], 1234.5)
        self.assertEqual(f["ios"], 6000)
        self.assertEqual(f["lat_p99_us"], 250.0)
        self.assertEqual(f["lat_p999_us"], 400.0)
        self.assertEqual(f["lat_mean_us"], 120.0)

    def test_mixed_workload_sums_both_directions(self):
        f = parse.fio_figures(fixtures.fio_json(iops=700, ios=3500, write_iops=300, write_ios=1500), "randrw70")
        self.assertEqual(f["iops"], 1000)
        self.assertEqual(f["ios"], 5000)

    def test_write_workload_reports_write_latency(self):
        f = parse.fio_figures(fixtures.fio_json(write_iops=10, write_ios=50), "randwrite")
        self.assertEqual(f["lat_mean_us"], 90.0)

    def test_missing_percentile_is_none(self):
        doc = fixtures.fio_json()
        del doc["jobs"][0]["read"]["clat_ns"]["percentile"]["99.900000"]
        self.assertIsNone(parse.fio_figures(doc, "randread")["lat_p999_us"])

    def test_no_job_is_an_error(self):
        with self.assertRaises(parse.ParseError):
            parse.fio_figures({"jobs": []}, "randread")


class Interrupts(unittest.TestCase):
    def test_sums_cpu_columns_and_keys_devices_by_action(self):
        counts = parse.interrupt_counts(fixtures.interrupts(q1=10, q2=7, loc=100))
        self.assertEqual(counts["nvma0q1"], 10)
        self.assertEqual(counts["nvma0q2"], 7)
        self.assertEqual(counts["LOC"], 200)
        self.assertEqual(counts["ERR"], 0)

    def test_device_irqs_exclude_admin_queue_and_other_controllers(self):
        counts = parse.interrupt_counts(fixtures.interrupts(q1=10, q2=7, loc=0, admin=1000))
        self.assertEqual(parse.device_irqs(counts, ["nvma0"]), 17)
        self.assertEqual(parse.device_irqs(counts, ["nvma0", "nvma1"]), 117)
        self.assertEqual(parse.device_irqs(counts, ["nvme0"]), 0)

    def test_controller_name_is_not_a_prefix_match(self):
        lines = [fixtures.INTERRUPTS_HEAD, " 30:  5  0  PCI-MSIX  1-edge  nvma10q1"]
        self.assertEqual(parse.device_irqs(parse.interrupt_counts(lines), ["nvma1"]), 0)

    def test_empty_snapshot(self):
        self.assertEqual(parse.interrupt_counts([]), {})


class Log(unittest.TestCase):
    def test_per_io_deltas(self):
        text = fixtures.bench_output([("adaptive-on", 32, 1000, 250, 500, 4000, 5000, 10)])
        samples, env, errors = parse.parse_log(text)
        self.assertEqual(errors, [])
        self.assertEqual(env["kernel"], "7.3.4")
        (s,) = samples
        self.assertEqual((s["driver"], s["qd"], s["ios"]), ("adaptive-on", 32, 5000))
        self.assertAlmostEqual(s["irqs_per_io"], 0.05)
        self.assertAlmostEqual(s["loc_per_io"], 0.2)  # 500 per CPU on two CPUs
        self.assertAlmostEqual(s["interrupts_per_io"], 0.25)
        self.assertAlmostEqual(s["polled_share"], 0.8)
        self.assertAlmostEqual(s["cpu_us_per_io"], 20 * 1e6 / 100 / 5000)
        self.assertAlmostEqual(s["ctx_per_io"], 1.0)

    def test_console_noise_and_carriage_returns_are_ignored(self):
        text = fixtures.bench_output([("stock", 1, 500, 2500, 0, 0, 0, 1)])
        noisy = "[    1.0] random kernel line\r\n" + text.replace("\n", "\r\n")
        samples, _, _ = parse.parse_log(noisy)
        self.assertEqual(len(samples), 1)
        self.assertIsNone(samples[0]["polled_share"])

    def test_errors_are_collected(self):
        _, _, errors = parse.parse_log("NVA-BENCH-ERROR cannot switch to stock\n")
        self.assertEqual(errors, ["cannot switch to stock"])

    def test_truncated_json_is_an_error(self):
        text = fixtures.bench_output([("stock", 1, 500, 2500, 0, 0, 0, 1)])
        lines = text.splitlines()
        begin = next(i for i, l in enumerate(lines) if l.startswith("NVA-BENCH-BEGIN"))
        del lines[begin + 1]  # the opening brace
        with self.assertRaises(parse.ParseError):
            parse.parse_log("\n".join(lines))

    def test_missing_snapshot_is_an_error(self):
        text = fixtures.bench_output([("stock", 1, 500, 2500, 0, 0, 0, 1)])
        cut = text.index("NVA-BENCH-SNAPSHOT after")
        with self.assertRaises(parse.ParseError):
            parse.parse_log(text[:cut] + "NVA-BENCH-END\n")

    def test_fio_json_round_trip(self):
        doc = fixtures.fio_json()
        self.assertEqual(json.loads(json.dumps(doc)), doc)


if __name__ == "__main__":
    unittest.main()
