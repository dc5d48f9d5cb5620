import contextlib
import io
import unittest

from benchlib import matrix, params
from tests.fixtures import load_script

bench = load_script("bench")
KNOWN = params.specs()


def check(*argv):
    return bench.check_args(bench.parser().parse_args(list(argv)), KNOWN)


class Arguments(unittest.TestCase):
    def test_default_is_the_quick_emulated_run(self):
        cells, setting = check()
        self.assertEqual(setting, "", "the module's defaults, as a user's insmod")
        self.assertEqual({c[1] for c in cells}, set(matrix.DRIVERS))
        self.assertEqual({c[3] for c in cells if c[2] == "randread"}, {1, 16, 32, 128})
        self.assertEqual({c[3] for c in cells if c[2] == "peak"}, {matrix.PEAK_QD})
        self.assertEqual(max(c[0] for c in cells), 3)

    def test_full_matrix_covers_the_issue(self):
        cells, _ = check("--full")
        self.assertEqual({c[2] for c in cells}, {"randread", "randwrite", "randrw70", "peak"})
        self.assertEqual({c[3] for c in cells if c[2] != "peak"}, {1, 4, 16, 32, 64, 128})
        self.assertEqual({c[4] for c in cells}, {1, 2})
        self.assertEqual({c[5] for c in cells}, {1, 2})

    def test_overrides(self):
        cells, setting = check("--qd", "8,64", "--reps", "2", "--runtime", "7", "--workloads", "randwrite",
                               "--params", "target_batch=16 max_delay_us=50")
        self.assertEqual(sorted({c[3] for c in cells}), [8, 64])
        self.assertEqual({(c[0], c[6], c[2]) for c in cells} >= {(2, 7, "randwrite")}, True)
        self.assertEqual(setting, "target_batch=16 max_delay_us=50")

    def test_latency_list(self):
        a = bench.parser().parse_args(["--latency", "0,200,1000"])
        bench.check_args(a, KNOWN)
        self.assertEqual(a.latencies, (0, 200, 1000))
        a = bench.parser().parse_args([])
        bench.check_args(a, KNOWN)
        self.assertEqual(a.latencies, bench.DEFAULT_LATENCIES_US)

    def test_driver_subset(self):
        cells, _ = check("--drivers", "stock,adaptive-off")
        self.assertEqual({c[1] for c in cells}, {"stock", "adaptive-off"})

    def test_bad_values_are_usage_errors(self):
        for argv in (["--qd", "0"], ["--qd", "x"], ["--reps", "0"], ["--runtime", "4000"], ["--workloads", "seqread"], ["--drivers", "stock,spdk"],
                     ["--params", "target_batch=1"], ["--params", "max_delay_us=10001"], ["--params", "nosuch=1"],
                     ["--params", "target_batch"], ["--params", "target_batch=-3"], ["--device", "01:00"],
                     ["--device", "01:00.0", "--device", "0000:01:00.0"], ["--latency", "-1"], ["--latency", "0,x"], ["--latency", "200,200"],
                     ["--device", "01:00.0", "--latency", "200"],
                     ["--device", "01:00.0", "--kernel", "debug"]):
            with self.subTest(argv=argv), self.assertRaises(bench.Usage):
                check(*argv)

    def test_unknown_option_exits_with_usage(self):
        err = io.StringIO()
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(err):
            bench.parser().parse_args(["--bogus"])
        self.assertIn("usage: tools/bench", err.getvalue())
        self.assertEqual(e.exception.code, 2)

    def test_hardware_defaults(self):
        cells, setting = check("--device", "01:00.0")
        self.assertEqual(setting, "")
        self.assertEqual({c[5] for c in check("--device", "01:00.0", "--full")[0]}, {1})
        self.assertEqual({c[5] for c in check("--device", "01:00.0", "--device", "02:00.0", "--full")[0]}, {1, 2})

    def test_every_policy_parameter_is_known_with_its_range(self):
        self.assertEqual(KNOWN["target_batch"], (2, 1024))
        self.assertEqual(KNOWN["backoff_max_us"], (10, 60_000_000))
        self.assertEqual(KNOWN["latency_budget_percent"], (1, 100))
        self.assertEqual(len(KNOWN), 9)


class Matrix(unittest.TestCase):
    def test_driver_order_rotates_between_repetitions(self):
        cells = matrix.cells(("randread",), (1,), (1,), (1,), 3, 1)
        order = [[c[1] for c in cells if c[0] == rep] for rep in (1, 2, 3)]
        self.assertEqual(order[0], list(matrix.DRIVERS))
        self.assertEqual(order[1], list(matrix.DRIVERS[1:] + matrix.DRIVERS[:1]))
        self.assertNotEqual(order[1], order[2])

    def test_render_is_what_bench_run_reads(self):
        self.assertEqual(matrix.render([(1, "stock", "randread", 32, 1, 2, 5)]), "1 stock randread 32 1 2 5\n")

    def test_estimate_counts_switches(self):
        one = [(1, "stock", "randread", 1, 1, 1, 5)]
        two = one + [(1, "adaptive-on", "randread", 1, 1, 1, 5)]
        self.assertEqual(matrix.seconds(two) - 2 * matrix.seconds(one), 0)
        self.assertGreater(matrix.seconds(two), matrix.seconds(one + one))


if __name__ == "__main__":
    unittest.main()
