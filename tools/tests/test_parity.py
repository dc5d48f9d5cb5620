import unittest

from tests.fixtures import load_script

parity = load_script("parity")


def entry(qd, driver, iops, irqs):
    return {"qd": qd, "driver": driver, "figures": {"iops": {"median": iops}, "irqs_per_io": {"median": irqs}}}


class Verdict(unittest.TestCase):
    def test_within_and_outside_tolerance(self):
        rows = parity.verdict([
            entry(1, "stock", 1000, 1.0), entry(1, "adaptive-off", 980, 1.02),
            entry(32, "stock", 1000, 0.40), entry(32, "adaptive-off", 950, 0.40),
        ], 0.03, 0.05)
        self.assertEqual([(r[0], r[3]) for r in rows], [(1, True), (32, False)])
        self.assertAlmostEqual(rows[1][1], 0.95)

    def test_irq_deviation_fails(self):
        rows = parity.verdict([entry(1, "stock", 1000, 0.5), entry(1, "adaptive-off", 1000, 0.56)], 0.03, 0.05)
        self.assertFalse(rows[0][3])

    def test_missing_driver_fails(self):
        rows = parity.verdict([entry(1, "stock", 1000, 1.0)], 0.03, 0.05)
        self.assertEqual(rows, [(1, None, None, False)])

    def test_interval_brackets_the_ratio_and_needs_two_runs(self):
        samples = [{"qd": 1, "driver": "stock", "iops": v} for v in (1000, 1010, 990, 1005)] + \
            [{"qd": 1, "driver": "adaptive-off", "iops": v} for v in (950, 960, 940, 955)] + \
            [{"qd": 32, "driver": "stock", "iops": 1000}, {"qd": 32, "driver": "adaptive-off", "iops": 990}]
        low, high = parity.iops_interval(samples, 1)
        self.assertTrue(0.93 <= low <= 0.952 <= high <= 0.97, (low, high))
        self.assertEqual(parity.iops_interval(samples, 1), (low, high))
        self.assertIsNone(parity.iops_interval(samples, 32))

    def test_qd1_counts_the_hosts_idle_time(self):
        self.assertEqual(dict(parity.bench_runs("instructions")),
                         {1: ["--timing", "host", "--icount", "shift=4"], 32: ["--timing", "instructions"]})
        self.assertEqual({t[1] for _, t in parity.bench_runs("host")}, {"host"})


if __name__ == "__main__":
    unittest.main()
