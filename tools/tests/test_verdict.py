"""tools/verdict on synthetic guest console logs (CRLF line ends, as the serial console gives)."""

import os
import subprocess
import tempfile
import unittest

VERDICT = os.path.join(os.path.dirname(__file__), "..", "verdict")
ADDR = "0000:00:04.0"
GUEST_END = ["NVA-RESULT PASS guest/dma-api-errors : error_count 0", "NVA-SUITE-END guest 1"]


def block(results, end=True):
    """The result block for RESULTS, with an end marker per suite (as tools/guest/run prints it),
    and the run's final check."""
    lines, counts = [], {}
    for r in results:
        lines.append(r)
        suite = r.split()[2].split("/")[0]
        counts[suite] = counts.get(suite, 0) + 1
    if end:
        lines += ["NVA-SUITE-END %s %d" % (s, n) for s, n in counts.items()]
    return lines + GUEST_END


def console(results, after_done=(), live=(), lines=None):
    body = lines if lines is not None else block(results)
    out = list(live) + ["NVA-RESULTS-BEGIN", *body, "NVA-RESULTS-END", "NVA-DONE", *after_done,
                        "[   23.204815] reboot: Power down"]
    return "".join(line + "\r\n" for line in out)


def judge(log_text, *args, status=None, suites=None):
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(log_text)
    cmd = [VERDICT, *args]
    if suites is not None:
        cmd += ["--suites", suites]
    cmd.append(f.name)
    if status is not None:
        cmd.append(str(status))
    try:
        run = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    return run.returncode, run.stdout.strip().splitlines()[-1], run.stdout


# Kernel reports as the kernel prints them; each must fail a run.
REPORTS = [
    "[    5.1] WARNING: CPU: 0 PID: 1 at drivers/nvme/x.c:12 f+0x1/0x2",
    "[    5.1] ------------[ cut here ]------------",
    "[    5.1] Unbalanced enable for IRQ 24",
    "[    5.1] irq 24: nobody cared (try booting with the \"irqpoll\" option)",
    "[    5.1] Disabling IRQ #24",
    "[    5.1] DMA-API: nvme 0000:00:04.0: device driver tries to free DMA memory it has not allocated",
    "[    5.1] DMA-API: nvme_adaptive 0000:00:04.0: device driver has pending DMA allocations while released",
    "[    5.1] ODEBUG: free active (active state 0) object: ffff888003 object type: hrtimer hint: f",
    "[    5.1] BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580",
    "[    5.1] BUG: KASAN: slab-use-after-free in nvme_adaptive_irq+0x1/0x2",
    "[    5.1] UBSAN: shift-out-of-bounds in drivers/x.c:1:2",
    "[    5.1] WARNING: possible circular locking dependency detected",
    "[    5.1] WARNING: inconsistent lock state",
    "[    5.1] [ BUG: Invalid wait context ]",
    "[    5.1] INFO: task fio:123 blocked for more than 122 seconds.",
    "[    5.1] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
    "[    5.1] rcu: INFO: rcu_preempt self-detected stall on CPU",
    "[    5.1] watchdog: BUG: soft lockup - CPU#1 stuck for 26s! [fio:100]",
    "[    5.1] Watchdog detected hard LOCKUP on cpu 1",
    "[    5.1] kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)",
    "[    5.1] unreferenced object 0xffff888003a1b2c0 (size 64):",
    "[    5.1] kmemleak: Kernel memory leak detector disabled",
    "[    5.1] Kernel panic - not syncing: Fatal exception",
    "[    5.1] Oops: general protection fault, probably for non-canonical address 0xdead: 0000 [#1]",
    "[    5.1] rust_kernel: panicked at nvme.rs:12:5:",
    "[    5.1] warning: cpu: 0 pid: 1 at x",  # case does not matter
]
# Lines that contain a report's words and are not reports.
BENIGN = [
    "[    0.1] kasan: KernelAddressSanitizer initialized (generic)",
    "[    0.1] DMA-API: preallocated 65536 debug entries",
    "[    0.1] DMA-API: debugging enabled by kernel config",
    "[    0.1] kmemleak: Kernel memory leak detector initialized (mem pool available: 15706)",
    "[    0.1] debug: unmapping init memory ffffffff83000000..ffffffff83400000",
    "[    0.1] Run /init as init process",
]


class Verdict(unittest.TestCase):
    def test_counts_results(self):
        code, summary, _ = judge(console(["NVA-RESULT PASS io/a", "NVA-RESULT SKIP io/b : no kmemleak"]),
                                 suites="io")
        self.assertEqual(code, 0)
        self.assertTrue(summary.startswith("guest: 2 passed, 0 failed, 1 skipped"), summary)

    def test_failed_check_fails(self):
        code, summary, _ = judge(console(["NVA-RESULT PASS io/a", "NVA-RESULT FAIL io/b : bad"]), suites="io")
        self.assertEqual(code, 1)
        self.assertTrue(summary.startswith("guest: 2 passed, 1 failed"), summary)

    def test_kernel_reports_fail(self):
        for line in REPORTS:
            with self.subTest(line=line):
                code, summary, out = judge(console(["NVA-RESULT PASS io/a"], live=[line]), suites="io")
                self.assertEqual(code, 1, out)
                self.assertIn("guest/console", out)

    def test_benign_lines_pass(self):
        code, summary, out = judge(console(["NVA-RESULT PASS io/a : fio: warning: ignored"], live=BENIGN),
                                   suites="io")
        self.assertEqual(code, 0, out)

    def test_report_after_done_fails(self):
        code, _, out = judge(console(["NVA-RESULT PASS io/a"], after_done=[REPORTS[0]]), suites="io")
        self.assertEqual(code, 1, out)

    def test_unfinished_guest_fails(self):
        code, summary, out = judge("NVA-RESULT PASS io/a\r\n", suites="io")
        self.assertEqual(code, 1)
        self.assertIn("guest/finished", out)
        self.assertIn("guest/results : no result block", out)

    def test_hang_fails(self):
        hang = "NVA-HOST-HANG no console output for 300 s; CPU#0 pv_native_safe_halt+0x16 (CPL 0, halted)"
        code, _, out = judge(console(["NVA-RESULT PASS io/a"]) + hang + "\n", suites="io")
        self.assertEqual(code, 1, out)
        self.assertIn("guest/hang : tools/vm ended the guest as hung: no console output for 300 s; CPU#0", out)

    def test_heartbeat_passes(self):
        code, _, out = judge(console(["NVA-RESULT PASS io/a"], live=["NVA-ALIVE 61.05 s"]), suites="io")
        self.assertEqual(code, 0, out)

    def test_empty_block_fails(self):
        code, _, out = judge(console([], lines=[]), suites="io")
        self.assertEqual(code, 1)
        self.assertIn("io/end : the suite did not report its end", out)
        self.assertIn("guest/end", out)

    def test_suite_without_checks_fails(self):
        code, _, out = judge(console([], lines=["NVA-SUITE-END io 0", *GUEST_END]), suites="io")
        self.assertEqual(code, 1)
        self.assertIn("io/end : the suite ran no check", out)

    def test_truncated_block_fails(self):
        text = "".join(l + "\r\n" for l in ["NVA-RESULTS-BEGIN", "NVA-RESULT PASS io/a", "NVA-RESU"])
        code, _, out = judge(text, suites="io")
        self.assertEqual(code, 1)
        self.assertIn("truncated", out)

    def test_count_mismatch_fails(self):
        # A result lost from the block (e.g. mangled by a kernel message) is noticed.
        lines = ["NVA-RESULT PASS io/a", "NVA-RESULT P[ 3.1] foo", "ASS io/b", "NVA-SUITE-END io 2", *GUEST_END]
        code, _, out = judge(console([], lines=lines), suites="io")
        self.assertEqual(code, 1)
        self.assertIn("io/end : the suite reported 2 results, the result block holds 1", out)

    def test_missing_requested_suite_fails(self):
        code, _, out = judge(console(["NVA-RESULT PASS io/a"]), suites="io,bind")
        self.assertEqual(code, 1)
        self.assertIn("bind/end", out)

    def test_suites_from_kernel_command_line(self):
        cmdline = "[    0.0] Command line: console=ttyS0 panic=-1 nva.suites=io,bind"
        code, _, out = judge(console(["NVA-RESULT PASS io/a"], live=[cmdline]))
        self.assertEqual(code, 1)
        self.assertIn("bind/end", out)
        code, _, out = judge(console(["NVA-RESULT PASS io/a", "NVA-RESULT PASS bind/b"], live=[cmdline]))
        self.assertEqual(code, 0, out)

    def test_missing_final_checks_fail(self):
        code, _, out = judge(console([], lines=["NVA-RESULT PASS io/a", "NVA-SUITE-END io 1"]), suites="io")
        self.assertEqual(code, 1)
        self.assertIn("guest/end", out)

    def test_fail_outside_block_fails(self):
        # A FAIL the block does not hold, split off by a kernel message mid-line.
        live = ["[    3.2] nvme nvme0: I/O tag 12 NVA-RESULT FAIL io/z : bad"]
        code, summary, out = judge(console(["NVA-RESULT PASS io/a"], live=live), suites="io")
        self.assertEqual(code, 1)
        self.assertIn("io/z : failed on the console", out)
        self.assertTrue(summary.startswith("guest: 2 passed, 1 failed"), summary)

    def test_live_fail_is_counted_once(self):
        live = ["NVA-RESULT FAIL io/b : bad"]
        code, summary, _ = judge(console(["NVA-RESULT FAIL io/b : bad"], live=live), suites="io")
        self.assertEqual(code, 1)
        self.assertTrue(summary.startswith("guest: 1 passed, 1 failed"), summary)

    def test_qemu_exit_status_counts(self):
        code, _, out = judge(console(["NVA-RESULT PASS io/a"]), status=124, suites="io")
        self.assertEqual(code, 1)
        self.assertIn("guest/qemu-exit : QEMU exited with status 124 (killed at the timeout)", out)
        code, _, _ = judge(console(["NVA-RESULT PASS io/a"]), status=0, suites="io")
        self.assertEqual(code, 0)

    def test_skips_on_debug_kernel(self):
        log = console(["NVA-RESULT PASS io/a", "NVA-RESULT SKIP io/b : no kmemleak"])
        code, _, out = judge(log, "--kernel", "debug", suites="io")
        self.assertEqual(code, 1)
        self.assertIn("io/b : skipped on the debug kernel", out)
        with tempfile.NamedTemporaryFile("w", delete=False) as allow:
            allow.write("# comment\nio/b   the device cannot do it\n")
        try:
            code, summary, out = judge(log, "--kernel", "debug", "--allowed-skips", allow.name, suites="io")
        finally:
            os.unlink(allow.name)
        self.assertEqual(code, 0, out)
        self.assertTrue(summary.startswith("guest: 2 passed, 0 failed, 1 skipped"), summary)
        code, _, _ = judge(log, "--kernel", "plain", suites="io")
        self.assertEqual(code, 0)

    def test_shutdown_confirmed_after_done(self):
        armed = f"NVA-RESULT PASS shutdown/armed : expecting shutdown of {ADDR}"
        code, summary, out = judge(console([armed], after_done=[f"[   23.1] nvme_adaptive {ADDR}: nvma0: shut down"]),
                                   suites="shutdown")
        self.assertEqual(code, 0, out)
        self.assertTrue(summary.startswith("guest: 3 passed, 0 failed"), summary)

    def test_shutdown_confirmed_by_controller_name(self):
        # On nvme-core the driver's message names the controller, not the PCI function.
        armed = f"NVA-RESULT PASS shutdown/armed : expecting shutdown of {ADDR} nvme1"
        code, _, out = judge(console([armed], after_done=["[   23.1] nvme nvme1: shut down"]), suites="shutdown")
        self.assertEqual(code, 0, out)
        code, _, out = judge(console([armed], after_done=["[   23.1] nvme nvme2: shut down"]), suites="shutdown")
        self.assertEqual(code, 1, out)

    def test_shutdown_not_confirmed_fails(self):
        armed = f"NVA-RESULT PASS shutdown/armed : expecting shutdown of {ADDR}"
        # The line before NVA-DONE does not count, nor does another controller's.
        code, summary, _ = judge(console([armed], live=[f"[ 9.0] nvme_adaptive {ADDR}: nvma0: shut down"],
                                         after_done=["[ 23.1] nvme_adaptive 0000:00:05.0: nvma1: shut down"]),
                                 suites="shutdown")
        self.assertEqual(code, 1)
        self.assertTrue(summary.startswith("guest: 2 passed, 1 failed"), summary)


if __name__ == "__main__":
    unittest.main()
