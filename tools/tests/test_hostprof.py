import unittest

from benchlib import hostprof, report

# perf script -G -F comm,time,ip,dso --ns of a run recorded with -k CLOCK_REALTIME.
SCRIPT = [
    "       CPU 1/TCG 1000.100000000:      7fbeb54fd9f8 (/tmp/perf-8002.map)",
    "       CPU 1/TCG 1003.000000000:      7fbeb54fd9f8 (/tmp/perf-8002.map)",
    "       CPU 1/TCG 1003.500000000:      559fd5a61970 (/usr/bin/qemu-system-x86_64)",
    "       CPU 1/TCG 1004.000000000:      7fbef65b02c3 (/usr/lib/x86_64-linux-gnu/libc.so.6)",
    "       CPU 1/TCG 1005.000000000:  ffffffff813aecd3 ([kernel.kallsyms])",
    "       CPU 0/TCG 1006.000000000:      7fbeb26aed1d (/tmp/perf-8002.map)",
    " qemu-system-x86 1006.500000000:  ffffffff813aecd3 ([kernel.kallsyms])",
    " qemu-system-x86 1007.000000000:      559fd5a61970 (/usr/bin/qemu-system-x86_64)",
    "          worker 1007.500000000:      7fbef65b02c3 (/usr/lib/x86_64-linux-gnu/libc.so.6)",
    "       CPU 1/TCG 1009.900000000:      7fbeb54fd9f8 (/tmp/perf-8002.map)",
    "not a sample line",
]


class Classify(unittest.TestCase):
    def test_thread_and_code(self):
        kinds = [k for _, k in hostprof.parse_script(SCRIPT)]
        self.assertEqual(kinds, [
            "host_vcpu_translated_us", "host_vcpu_translated_us", "host_vcpu_qemu_us", "host_vcpu_qemu_us",
            "host_vcpu_kernel_us", "host_vcpu_translated_us", "host_other_kernel_us", "host_other_qemu_us",
            "host_other_qemu_us", "host_vcpu_translated_us",
        ])

    def test_times_sorted(self):
        times = [t for t, _ in hostprof.parse_script(reversed(SCRIPT))]
        self.assertEqual(times, sorted(times))
        self.assertEqual(times[0], 1000.1)


class Figures(unittest.TestCase):
    def setUp(self):
        self.parsed = hostprof.parse_script(SCRIPT)
        self.times = [t for t, _ in self.parsed]

    def test_window_leaves_out_the_ends(self):
        # A 10 s job from 1000 s counts 1002..1008 s: not the samples at 1000.1 and 1009.9.
        f = hostprof.figures(self.parsed, self.times, 1000.0, 10.0, 1000.0, hz=100)
        per_sample = 1e6 / 100 / (1000.0 * 6)
        self.assertAlmostEqual(f["host_vcpu_translated_us"], 2 * per_sample)
        self.assertAlmostEqual(f["host_vcpu_qemu_us"], 2 * per_sample)
        self.assertAlmostEqual(f["host_vcpu_kernel_us"], per_sample)
        self.assertAlmostEqual(f["host_other_kernel_us"], per_sample)
        self.assertAlmostEqual(f["host_other_qemu_us"], 2 * per_sample)
        self.assertAlmostEqual(f["host_us_per_io"], 8 * per_sample)

    def test_short_job_keeps_its_middle_half(self):
        self.assertEqual(hostprof.window(1000.0, 4.0), (1001.0, 1003.0))

    def test_no_samples_in_window(self):
        with self.assertRaises(hostprof.Error):
            hostprof.figures(self.parsed, self.times, 2000.0, 10.0, 1000.0)

    def test_samples(self):
        samples = [
            {"cell": 1, "iops": 1000.0, "job_start_ms": 1000000, "job_runtime_ms": 10000},
            {"cell": 2, "iops": 1000.0, "job_start_ms": 5000000, "job_runtime_ms": 10000},
            {"cell": 3, "iops": 900000.0},  # t/io_uring: no job start
        ]
        self.assertEqual(hostprof.add_to_samples(samples, SCRIPT, hz=100), 1)
        self.assertIn("host_us_per_io", samples[0])
        self.assertNotIn("host_us_per_io", samples[1])
        self.assertNotIn("host_us_per_io", samples[2])


class Table(unittest.TestCase):
    def test_rows_and_ratio(self):
        base = {"workload": "randread", "cpus": "1", "ctrls": 1, "qd": 32, "rate": 0, "iops": 1.0}
        samples = []
        for driver, total in (("stock", 40.0), ("adaptive-off", 50.0)):
            s = dict(base, driver=driver, host_us_per_io=total)
            s.update({f: total / len(hostprof.KINDS) for f, _ in hostprof.KINDS})
            samples.append(s)
        lines = report.host_time_table(report.summarize(samples))
        self.assertIn("vCPU: translated", lines[2])
        row = next(l for l in lines if "adaptive off" in l)
        self.assertIn("| 50.0 (50.0–50.0) |", row)
        self.assertTrue(row.rstrip().endswith("| 1.25 |"), row)
        self.assertIn("Host time per I/O", "\n".join(report.markdown(report.summarize(samples)).splitlines()))


if __name__ == "__main__":
    unittest.main()
