"""tools/verdict on synthetic guest console logs (CRLF line ends, as the serial console gives)."""

import os
import subprocess
import tempfile
import unittest

VERDICT = os.path.join(os.path.dirname(__file__), "..", "verdict")
ADDR = "0000:00:04.0"


def console(results, after_done=(), live=()):
    lines = list(live) + ["NVA-RESULTS-BEGIN", *results, "NVA-RESULTS-END", "NVA-DONE", *after_done,
                          "[   23.204815] reboot: Power down"]
    return "".join(line + "\r\n" for line in lines)


def judge(log_text):
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(log_text)
    try:
        run = subprocess.run([VERDICT, f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    return run.returncode, run.stdout.strip().splitlines()[-1]


class Verdict(unittest.TestCase):
    def test_counts_results(self):
        code, summary = judge(console(["NVA-RESULT PASS io/a", "NVA-RESULT SKIP io/b : no kmemleak"]))
        self.assertEqual(code, 0)
        self.assertTrue(summary.startswith("guest: 1 passed, 0 failed, 1 skipped"), summary)

    def test_failed_check_fails(self):
        code, summary = judge(console(["NVA-RESULT PASS io/a", "NVA-RESULT FAIL io/b : bad"]))
        self.assertEqual(code, 1)
        self.assertTrue(summary.startswith("guest: 1 passed, 1 failed"), summary)

    def test_kernel_warning_fails(self):
        code, summary = judge(console(["NVA-RESULT PASS io/a"], live=["[ 1.0] WARNING: CPU: 0 PID: 1 at x"]))
        self.assertEqual(code, 1)
        self.assertTrue(summary.startswith("guest: 1 passed, 1 failed"), summary)

    def test_unfinished_guest_fails(self):
        code, summary = judge("NVA-RESULT PASS io/a\r\n")
        self.assertEqual(code, 1)
        self.assertTrue(summary.startswith("guest: 1 passed, 1 failed"), summary)

    def test_shutdown_confirmed_after_done(self):
        armed = f"NVA-RESULT PASS shutdown/armed : expecting shutdown of {ADDR}"
        code, summary = judge(console([armed], after_done=[f"[   23.1] nvme_adaptive {ADDR}: nvma0: shut down"]))
        self.assertEqual(code, 0)
        self.assertTrue(summary.startswith("guest: 2 passed, 0 failed"), summary)

    def test_shutdown_not_confirmed_fails(self):
        armed = f"NVA-RESULT PASS shutdown/armed : expecting shutdown of {ADDR}"
        # The line before NVA-DONE does not count, nor does another controller's.
        code, summary = judge(console([armed], live=[f"[ 9.0] nvme_adaptive {ADDR}: nvma0: shut down"],
                                      after_done=["[ 23.1] nvme_adaptive 0000:00:05.0: nvma1: shut down"]))
        self.assertEqual(code, 1)
        self.assertTrue(summary.startswith("guest: 1 passed, 1 failed"), summary)


if __name__ == "__main__":
    unittest.main()
