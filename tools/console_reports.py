"""The kernel's error reports on a guest console: what fails a test run (tools/verdict) and a
benchmark run (tools/bench)."""

import re

# Kernel reports that fail a run whatever its checks or figures said. Matched case-insensitively.
REPORTS = [
    r"\boops\b", r"\bbug:", r"\bwarning:", r"kernel panic", r"general protection fault",
    r"\bkasan\b.*\b(out-of-bounds|use-after-free|double-free|invalid-free|wild-memory-access|null-ptr-deref)",
    r"\bubsan:", r"panicked at", r"\bcut here\b",
    # lockdep
    r"possible circular locking", r"inconsistent lock state", r"possible recursive locking",
    r"suspicious rcu usage", r"bad unlock balance", r"held lock freed", r"invalid wait context",
    r"possible irq lock inversion", r"turning off the locking correctness validator",
    r"lock held when returning to user space", r"lockdep is turned off",
    # hung tasks, stalls, lockups
    r"blocked for more than", r"detected (expedited )?stalls?\b", r"self-detected stall",
    r"soft lockup", r"hard lockup", r"workqueue lockup",
    # interrupts
    r"unbalanced (enable|disable|wake)", r"nobody cared", r"disabling irq #",
    # debugging facilities
    r"dma-api:", r"\bodebug:", r"sleeping function called from invalid context",
    r"scheduling while atomic",
    r"unreferenced object", r"suspected memory leaks?", r"kernel memory leak detector disabled",
    r"kmemleak: .*(disabled|failed)",
]
# Informational lines that contain a report's words (boot banners of the debugging facilities).
BENIGN = [
    r"dma-api: preallocated \d+ debug entries", r"dma-api: debugging enabled by kernel config",
    r"odebug: selftest passed", r"odebug: \d+ of \d+ active objects replaced",
    r"kmemleak: kernel memory leak detector initialized", r"kmemleak: automatic memory scanning thread",
    # The boot's echo of the command line (a benchmark guest boots with oops=panic).
    r"command line: ",
]
REPORT_RE = re.compile("|".join("(?:%s)" % p for p in REPORTS), re.I)
BENIGN_RE = re.compile("|".join("(?:%s)" % p for p in BENIGN), re.I)

# A kernel message's time stamp, "[   12.345678]".
STAMP_RE = re.compile(r"\[\s*\d+\.\d+\]")


def is_report(line):
    """Whether LINE reads like a kernel error report."""
    return bool(REPORT_RE.search(line)) and not BENIGN_RE.search(line)


def kernel_reports(lines):
    """The lines of LINES that are kernel error reports, judged on kernel messages only (those
    with a time stamp): other output on the console, such as a tool's, cannot match by chance."""
    return [line.strip() for line in lines if STAMP_RE.search(line) and is_report(line)]
