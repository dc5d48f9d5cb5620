"""Kernel reports on a guest console: the shared list (console_reports.py) and what tools/bench
makes of them."""

import os
import tempfile
import unittest

from console_reports import kernel_reports
from tests import fixtures

bench = fixtures.load_script("bench")

OOPS = "[    1.318229] Oops: Oops: 0002 [#1] SMP"
WARN = "[   40.123456] WARNING: kernel/sched/core.c:6753 at __schedule+0x666/0x6c0, CPU#0: migration/0/16"


class Reports(unittest.TestCase):
    def test_kernel_messages_that_report_trouble(self):
        lines = [OOPS + "\r", "[    2.000000] nvme nvme0: 2/0/0 default/read/poll queues", WARN,
                 "[    0.500000] DMA-API: preallocated 65536 debug entries",
                 "[    0.370265] Kernel command line: console=ttyS0 panic=-1 nva.bench=1 oops=panic"]
        self.assertEqual(kernel_reports(lines), [OOPS, WARN])

    def test_other_output_on_the_console_is_not_a_report(self):
        # A tool's own words (fio warns on stderr, a JSON key could say "bug:") carry no time stamp.
        self.assertEqual(kernel_reports(["fio: warning: something", '  "bug: no" : 1', "Oops"]), [])


class EmulatedRun(unittest.TestCase):
    def report(self, console, mode="emulated"):
        with tempfile.TemporaryDirectory() as out:
            log = os.path.join(out, "console.log")
            with open(log, "w") as f:
                f.write(console)
            _, _, errors, samples, _ = bench.make_report(out, log, {"mode": mode})
        return errors, samples

    def test_a_kernel_report_during_the_run_is_an_error(self):
        # While cells run, kernel messages stay off the console; the guest prints its kernel log
        # at the end (tools/guest/init), boot messages included.
        text = fixtures.bench_output([("stock", 32, 1000, 500, 100, 0, 0, 50)])
        dmesg = ["[    0.370265] Kernel command line: console=ttyS0 nva.bench=1 oops=panic", WARN]
        errors, samples = self.report(text + "".join("NVA-BENCH-DMESG %s\n" % line for line in dmesg))
        self.assertEqual(len(samples), 1, "the figures are still reported")
        self.assertEqual(errors, ["kernel: " + WARN])

    def test_a_boot_report_on_the_console_and_in_the_log_counts_once(self):
        text = fixtures.bench_output([("stock", 32, 1000, 500, 100, 0, 0, 50)])
        errors, _ = self.report(OOPS + "\n" + text + "NVA-BENCH-DMESG " + OOPS + "\n")
        self.assertEqual(errors, ["kernel: " + OOPS])

    def test_a_clean_console_has_no_errors(self):
        errors, _ = self.report(fixtures.bench_output([("stock", 32, 1000, 500, 100, 0, 0, 50)]))
        self.assertEqual(errors, [])

    def test_hardware_logs_carry_the_host_kernel_reports_already(self):
        text = "NVA-BENCH-ERROR kernel: " + WARN + "\n" + fixtures.bench_output([("stock", 32, 1000, 500, 100, 0, 0, 50)])
        errors, _ = self.report(text, mode="hardware")
        self.assertEqual(errors, ["kernel: " + WARN], "listed once, from the log's own error line")


if __name__ == "__main__":
    unittest.main()
