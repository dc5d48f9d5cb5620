import contextlib
import io
import unittest
from unittest import mock

from benchlib import matrix, params
from tests.fixtures import load_script

bench = load_script("bench")
KNOWN = params.specs()


def check(*argv):
    return bench.check_args(bench.parser().parse_args(list(argv)), KNOWN)


class Arguments(unittest.TestCase):
    def test_default_is_the_quick_emulated_run(self):
        a = bench.parser().parse_args([])
        cells, setting = bench.check_args(a, KNOWN)
        self.assertEqual(setting, "", "the module's defaults, as a user's insmod")
        self.assertEqual({c.driver for c in cells}, set(matrix.DRIVERS))
        self.assertEqual({c.qd for c in cells if c.workload == "randread" and not c.rate}, {1, 32, 128})
        self.assertEqual({c.qd for c in cells if c.workload == "peak"}, {matrix.PEAK_QD})
        self.assertEqual({(c.qd, c.rate) for c in cells if c.rate}, {(32, 25), (32, 50), (32, 75)})
        self.assertEqual({c.cpus for c in cells}, {"1"})
        self.assertEqual(max(c.rep for c in cells if not c.rate), 3)
        self.assertEqual(max(c.rep for c in cells if c.rate), 2)
        self.assertEqual(a.dbcs_modes, ("on", "off"), "both doorbell modes")
        self.assertLess(matrix.seconds(cells), 10 * 60, "two boots of under 10 minutes")

    def test_equal_load_cells_run_after_their_reference(self):
        cells, _ = check()
        first_rate = next(i for i, c in enumerate(cells) if c.rate)
        self.assertTrue(all(c.rate for c in cells[first_rate:]))
        self.assertTrue(all(c.workload == "randread" for c in cells if c.rate))

    def test_full_matrix_covers_the_issue(self):
        cells, _ = check("--full")
        self.assertEqual({c.workload for c in cells}, {"randread", "randwrite", "randrw70", "peak"})
        self.assertEqual({c.qd for c in cells if c.workload != "peak"}, {1, 4, 16, 32, 64, 128})
        self.assertEqual({c.cpus for c in cells}, {"1", "0", "0,1"}, "a job on each CPU, and both")
        self.assertEqual({c.ctrls for c in cells}, {1, 2})
        self.assertEqual({c.qd for c in cells if c.rate}, {1, 32, 128})

    def test_smoke_is_one_boot_without_equal_load_cells(self):
        a = bench.parser().parse_args(["--smoke"])
        cells, _ = bench.check_args(a, KNOWN)
        self.assertEqual(a.dbcs_modes, ("on",))
        self.assertFalse([c for c in cells if c.rate])
        # tools/test's bench_smoke counts three cells per configuration.
        for driver in matrix.DRIVERS:
            self.assertEqual(len([c for c in cells if c.driver == driver]), 3)

    def test_overrides(self):
        cells, setting = check("--qd", "8,64", "--reps", "2", "--runtime", "7", "--workloads", "randwrite",
                               "--params", "target_batch=16 max_delay_us=50")
        self.assertEqual(sorted({c.qd for c in cells}), [8, 64])
        self.assertEqual({(c.rep, c.runtime, c.workload) for c in cells} >= {(2, 7, "randwrite")}, True)
        self.assertEqual(setting, "target_batch=16 max_delay_us=50")
        self.assertFalse([c for c in cells if c.rate], "no randread, no QD 32: no equal-load cells by default")

    def test_latency_list(self):
        a = bench.parser().parse_args(["--latency", "0,200,1000"])
        bench.check_args(a, KNOWN)
        self.assertEqual(a.latencies, (0, 200, 1000))
        a = bench.parser().parse_args([])
        bench.check_args(a, KNOWN)
        self.assertEqual(a.latencies, bench.DEFAULT_LATENCIES_US)

    def test_dbcs(self):
        for value, modes in (("on", ("on",)), ("off", ("off",)), ("both", ("on", "off"))):
            a = bench.parser().parse_args(["--dbcs", value])
            bench.check_args(a, KNOWN)
            self.assertEqual(a.dbcs_modes, modes)

    def test_runs_get_a_directory_each_when_there_are_several(self):
        ic = bench.INSTRUCTION_ICOUNT
        a = bench.parser().parse_args(["--latency", "0,1000", "--timing", "host"])
        bench.check_args(a, KNOWN)
        self.assertEqual(bench.plan_runs(a, "/out"), [
            (0, "on", None, "/out/0us-dbcs-on"), (0, "off", None, "/out/0us-dbcs-off"),
            (1000, "on", None, "/out/1000us-dbcs-on"), (1000, "off", None, "/out/1000us-dbcs-off")])
        a = bench.parser().parse_args(["--dbcs", "off", "--timing", "host"])
        bench.check_args(a, KNOWN)
        self.assertEqual(bench.plan_runs(a, "/out"), [(1000, "off", None, "/out")])
        a = bench.parser().parse_args(["--dbcs", "off"])
        bench.check_args(a, KNOWN)
        self.assertEqual(bench.plan_runs(a, "/out"), [(1000, "off", None, "/out/host"),
                                                      (0, "off", ic, "/out/instructions")])
        a = bench.parser().parse_args([])
        bench.check_args(a, KNOWN)
        self.assertEqual(bench.plan_runs(a, "/out"), [
            (1000, "on", None, "/out/dbcs-on"), (1000, "off", None, "/out/dbcs-off"),
            (0, "on", ic, "/out/instructions-dbcs-on"), (0, "off", ic, "/out/instructions-dbcs-off")])
        a = bench.parser().parse_args(["--timing", "instructions", "--dbcs", "on"])
        bench.check_args(a, KNOWN)
        self.assertEqual(bench.plan_runs(a, "/out"), [(0, "on", ic, "/out")])

    def test_timing(self):
        for argv, timings in (([], ("host", "instructions")), (["--smoke"], ("host",)),
                              (["--full"], ("host", "instructions")), (["--timing", "host"], ("host",)),
                              (["--timing", "instructions"], ("instructions",)),
                              (["--smoke", "--timing", "both"], ("host", "instructions"))):
            with self.subTest(argv=argv):
                a = bench.parser().parse_args(argv)
                bench.check_args(a, KNOWN)
                self.assertEqual(a.timings, timings)
        a = bench.parser().parse_args(["--device", "01:00.0"])
        bench.check_args(a, KNOWN)
        self.assertEqual(bench.plan_runs(a, "/out"), [(None, None, None, "/out")], "hardware runs on its own clock")
        check("--icount", "shift=3", "--latency", "0")
        # Instructions are counted in host-timed runs (the plugin and -icount crash the guest).
        check("--insns", "--timing", "host")
        check("--smoke", "--insns")
        check("--timing", "instructions", "--latency", "0")

    def test_timing_notes_say_where_the_spread_comes_from(self):
        host = bench.timing_note({"mode": "emulated", "icount": None, "host_cpus": 2, "host_qemu_processes": 0,
                                  "host_loadavg": "0.5 0.4 0.3"})
        self.assertIn("Host-timed", host)
        self.assertIn("2 host CPUs, 0 other QEMU processes, load 0.5 0.4 0.3", host)
        self.assertIn("Instruction-timed", bench.timing_note({"mode": "emulated", "icount": bench.INSTRUCTION_ICOUNT}))
        self.assertIn("shift=3", bench.timing_note({"mode": "emulated", "icount": "shift=3"}))
        self.assertIsNone(bench.timing_note({"mode": "hardware"}))

    def test_placement(self):
        cells, _ = check("--placement", "0,1,0+1")
        self.assertEqual({c.cpus for c in cells}, {"0", "1", "0,1"})
        self.assertEqual({matrix.jobs(c.cpus) for c in cells}, {1, 2})
        self.assertEqual(matrix.placement_label("0,1"), "2 jobs on CPUs 0+1")
        self.assertEqual(matrix.placement_label("0"), "1 job on CPU 0")

    def test_rates(self):
        self.assertEqual({c.rep for c in check("--reps", "4")[0] if c.rate}, {1, 2, 3, 4}, "--reps sets both")
        cells, _ = check("--rates", "10,90", "--qd", "1,16", "--rate-qd", "16")
        self.assertEqual({(c.qd, c.rate) for c in cells if c.rate}, {(16, 10), (16, 90)})
        cells, _ = check("--rates", "none")
        self.assertFalse([c for c in cells if c.rate])
        cells, _ = check("--rates", "50", "--qd", "4")
        self.assertEqual({(c.qd, c.rate) for c in cells if c.rate}, {(4, 50)}, "explicit rates at the sweep's QDs")
        cells, _ = check("--drivers", "adaptive-on,adaptive-off")
        self.assertFalse([c for c in cells if c.rate], "without stock, no reference: no equal-load cells by default")

    def test_driver_subset(self):
        cells, _ = check("--drivers", "stock,adaptive-off")
        self.assertEqual({c.driver for c in cells}, {"stock", "adaptive-off"})

    def test_host_profile_needs_perf_and_host_timing(self):
        with mock.patch.object(bench.shutil, "which", return_value="/usr/bin/perf"):
            check("--host-profile", "--timing", "host")
            check("--host-profile")
        with mock.patch.object(bench.shutil, "which", return_value=None), self.assertRaises(bench.Usage):
            check("--host-profile", "--timing", "host")

    def test_bad_values_are_usage_errors(self):
        for argv in (["--qd", "0"], ["--qd", "x"], ["--reps", "0"], ["--runtime", "4000"], ["--workloads", "seqread"], ["--drivers", "stock,spdk"],
                     ["--params", "target_batch=1"], ["--params", "max_delay_us=100001"], ["--params", "nosuch=1"],
                     ["--params", "target_batch"], ["--params", "target_batch=-3"], ["--device", "01:00"],
                     ["--device", "01:00.0", "--device", "0000:01:00.0"], ["--latency", "-1"], ["--latency", "0,x"], ["--latency", "200,200"],
                     ["--device", "01:00.0", "--latency", "200"],
                     ["--device", "01:00.0", "--kernel", "debug"],
                     ["--device", "01:00.0", "--dbcs", "off"], ["--device", "01:00.0", "--pin-vcpus"],
                     ["--device", "01:00.0", "--icount", "shift=3"], ["--device", "01:00.0", "--insns"],
                     ["--device", "01:00.0", "--host-profile"],
                     ["--host-profile", "--timing", "instructions", "--latency", "0"],
                     ["--host-profile", "--timing", "host", "--icount", "shift=3", "--latency", "0"],
                     ["--device", "01:00.0", "--timing", "host"], ["--icount", "shift=3"],
                     ["--icount", "shift=3", "--latency", "0,200"], ["--timing", "instructions", "--latency", "200"],
                     ["--insns"], ["--insns", "--timing", "instructions"], ["--insns", "--timing", "both"],
                     ["--insns", "--timing", "host", "--icount", "shift=3", "--latency", "0"],
                     ["--io-uring", "/usr/bin/true"],
                     ["--placement", "2"], ["--placement", "0+0"], ["--placement", "1,1"], ["--placement", "a"],
                     ["--placement", "1,"], ["--placement", "-1"],
                     ["--rates", "0"], ["--rates", "101"], ["--rates", "25,25"], ["--rates", "x"],
                     ["--rate-qd", "64"], ["--qd", "1,16", "--rate-qd", "32"],
                     ["--rates", "50", "--drivers", "adaptive-on"], ["--rates", "50", "--workloads", "peak"]):
            with self.subTest(argv=argv), self.assertRaises(bench.Usage):
                check(*argv)
        for bad in (["--dbcs", "maybe"], ["--timing", "guest"]):
            with self.subTest(argv=bad), self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                check(*bad)

    def test_unknown_option_exits_with_usage(self):
        err = io.StringIO()
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(err):
            bench.parser().parse_args(["--bogus"])
        self.assertIn("usage: tools/bench", err.getvalue())
        self.assertEqual(e.exception.code, 2)

    def test_hardware_defaults(self):
        cells, setting = check("--device", "01:00.0")
        self.assertEqual(setting, "")
        self.assertFalse([c for c in cells if c.workload in matrix.WRITES], "the quick run only reads")
        full = "--device", "01:00.0", "--full", "--allow-writes"
        self.assertEqual({c.ctrls for c in check(*full)[0]}, {1})
        self.assertEqual({c.ctrls for c in check(*full, "--device", "02:00.0")[0]}, {1, 2})
        self.assertEqual({c.cpus for c in check("--device", "01:00.0", "--placement", "6,7,6+7")[0]}, {"6", "7", "6,7"})

    def test_writes_to_hardware_need_allow_writes(self):
        for argv in (["--full"], ["--workloads", "randwrite"], ["--workloads", "randread,randrw70"]):
            with self.subTest(argv=argv):
                with self.assertRaises(bench.Usage) as e:
                    check("--device", "01:00.0", *argv)
                self.assertIn("data on 0000:01:00.0 will be lost", str(e.exception))
                self.assertIn("--allow-writes", str(e.exception))
                check("--device", "01:00.0", "--allow-writes", *argv)
        # Emulated devices are null-backed: nothing to lose.
        check("--full")

    def test_every_policy_parameter_is_known_with_its_range(self):
        self.assertEqual(KNOWN["target_batch"], (2, 1024))
        self.assertEqual(KNOWN["backoff_max_us"], (10, 60_000_000))
        self.assertEqual(KNOWN["latency_budget_percent"], (1, 100))
        self.assertEqual(len(KNOWN), 9)


class Matrix(unittest.TestCase):
    def test_driver_order_rotates_between_repetitions(self):
        cells = matrix.cells(("randread",), (1,), ("1",), (1,), 3, 1)
        order = [[c.driver for c in cells if c.rep == rep] for rep in (1, 2, 3)]
        self.assertEqual(order[0], list(matrix.DRIVERS))
        self.assertEqual(order[1], list(matrix.DRIVERS[1:] + matrix.DRIVERS[:1]))
        self.assertNotEqual(order[1], order[2])

    def test_equal_load_cells_rotate_too(self):
        cells = matrix.cells(("randread",), (32,), ("1",), (1,), 2, 1, rates=(25, 75), rate_qds=(32,))
        rate = [c for c in cells if c.rate]
        self.assertEqual(len(rate), 2 * 2 * len(matrix.DRIVERS))
        self.assertEqual(rate[0].driver, matrix.DRIVERS[0])
        self.assertEqual(next(c for c in rate if c.rep == 2).driver, matrix.DRIVERS[1])

    def test_render_is_what_bench_run_reads(self):
        self.assertEqual(matrix.render([matrix.Cell(1, "stock", "randread", 32, "0,1", 2, 5, 0)]),
                         "1 stock randread 32 0,1 2 5 0\n")

    def test_estimate_counts_switches(self):
        one = [matrix.Cell(1, "stock", "randread", 1, "1", 1, 5, 0)]
        two = one + [matrix.Cell(1, "adaptive-on", "randread", 1, "1", 1, 5, 0)]
        self.assertEqual(matrix.seconds(two) - 2 * matrix.seconds(one), 0)
        self.assertGreater(matrix.seconds(two), matrix.seconds(one + one))


class Qemu(unittest.TestCase):
    def test_finds_the_runs_qemu_and_its_vcpu_threads(self):
        import os
        import tempfile
        with tempfile.TemporaryDirectory() as proc:
            def task(pid, tid, comm, cmdline=None):
                os.makedirs(os.path.join(proc, str(pid), "task", str(tid)), exist_ok=True)
                with open(os.path.join(proc, str(pid), "task", str(tid), "comm"), "w") as f:
                    f.write(comm + "\n")
                if cmdline is not None:
                    with open(os.path.join(proc, str(pid), "cmdline"), "wb") as f:
                        f.write(b"\0".join(x.encode() for x in cmdline) + b"\0")
            task(10, 10, "qemu-system-x86", ["qemu-system-x86_64", "-initrd", "/cache/run/debug-7/initramfs.cpio"])
            task(20, 20, "qemu-system-x86", ["qemu-system-x86_64", "-initrd", "/cache/run/plain-99/initramfs.cpio"])
            task(20, 21, "CPU 0/TCG")
            task(20, 22, "CPU 1/TCG")
            task(20, 23, "worker")
            task(30, 30, "bash", ["bash", "/cache/run/plain-99/x"])
            self.assertEqual(bench.find_qemu("/cache/run/plain-99/", proc), 20)
            self.assertIsNone(bench.find_qemu("/cache/run/plain-5/", proc))
            self.assertEqual(bench.vcpu_threads(20, proc), {0: 21, 1: 22})
