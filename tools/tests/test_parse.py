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

    def test_tail_percentiles_max_and_histogram(self):
        doc = fixtures.fio_json()
        clat = doc["jobs"][0]["read"]["clat_ns"]
        clat.update(max=2_000_000, bins={"100000": 7, "2000000": 1})
        clat["percentile"]["99.990000"] = 1_500_000
        f = parse.fio_figures(doc, "randread")
        self.assertEqual((f["lat_p9999_us"], f["lat_max_us"]), (1500.0, 2000.0))
        self.assertEqual(f["_bins"], {100000: 7, 2000000: 1})

    def test_no_job_is_an_error(self):
        with self.assertRaises(parse.ParseError):
            parse.fio_figures({"jobs": []}, "randread")


class IoUring(unittest.TestCase):
    OUTPUT = """submitter=0, tid=812, file=/dev/nvma0n1, nfiles=1, node=-1
polled=0, fixedbufs=1, register_files=1, buffered=0, QD=128
Engine=io_uring, sq_ring=128, cq_ring=256
IOPS=40123, BW=156MiB/s, IOS/call=32/31
IOPS=120.50K, BW=470MiB/s, IOS/call=32/32
IOPS=119.50K, BW=466MiB/s, IOS/call=32/32
IOPS=1.20M, BW=4.68GiB/s, IOS/call=32/32
Exiting on timeout
Maximum IOPS=1.20M""".splitlines()

    def test_mean_of_the_seconds_after_the_first(self):
        f = parse.io_uring_figures(self.OUTPUT)
        self.assertEqual(f["iops_per_second"], [40123, 120500, 119500, 1200000])
        self.assertAlmostEqual(f["iops"], (120500 + 119500 + 1200000) / 3)

    def test_short_runs_use_every_second(self):
        self.assertEqual(parse.io_uring_figures(["IOPS=100, BW=0MiB/s, IOS/call=1/1", "IOPS=300, BW=1MiB/s, IOS/call=1/1"])["iops"], 200)

    def test_no_iops_line_is_an_error(self):
        with self.assertRaises(parse.ParseError):
            parse.io_uring_figures(["Your filesystem/driver/kernel doesn't support polled IO"])

    def test_peak_cell_counts_ios_from_the_disks(self):
        text = fixtures.bench_output([("stock-poll", 128, 1000, 0, 0, 0, 0, 200)], tool="t-io_uring",
                                     tool_output=self.OUTPUT, disk_ios=6000)
        (s,) = parse.parse_log(text)[0]
        self.assertEqual((s["tool"], s["workload"], s["ios"], s["disk_ios"]), ("t-io_uring", "peak", 6000, 6000))
        self.assertAlmostEqual(s["iops_per_core"], 6000 / 4.0)  # 200 ticks user + 200 system
        self.assertAlmostEqual(s["elapsed_s"], 5.0)
        self.assertNotIn("lat_p99_us", s)


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

    def test_environment_lines_add_up(self):
        text = ("NVA-BENCH-ENV kernel=7.3.4 cpus=2\nNVA-BENCH-ENV-TEXT cmdline console=ttyS0 tsc=reliable\n"
                "NVA-BENCH-ENV dev0_addr=0000:00:04.0 dev0_numa_node=-1\nNVA-BENCH-ENV-TEXT dev0_model QEMU NVMe Ctrl\n")
        _, env, _ = parse.parse_log(text)
        self.assertEqual(env, {"kernel": "7.3.4", "cpus": "2", "cmdline": "console=ttyS0 tsc=reliable",
                               "dev0_addr": "0000:00:04.0", "dev0_numa_node": "-1", "dev0_model": "QEMU NVMe Ctrl"})

    def test_cell_fields(self):
        (s,) = parse.parse_log(fixtures.bench_output([("stock", 32, 1000, 0, 0, 0, 0, 10)], cpus="0,1", rate=50))[0]
        self.assertEqual((s["cpus"], s["jobs"], s["rate"], s["rate_iops"], s["tool"]), ("0,1", 2, 50, 500, "fio"))
        self.assertIn('"iops"', s["_raw"])

    def test_logs_before_placements_pinned_to_cpu_1_first(self):
        text = fixtures.bench_output([("stock", 32, 1000, 0, 0, 0, 0, 10)]).replace(" cpus=1", "").replace(" rate=0", "")
        (s,) = parse.parse_log(text)[0]
        self.assertEqual((s["cpus"], s["rate"], s["elapsed_s"]), ("1", 0, 5.0))
        self.assertEqual(parse.default_cpus(2), "0,1")

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
