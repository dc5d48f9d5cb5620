"""tools/hang-report: a hung guest's vCPUs placed in the kernel's text."""

import os
import subprocess
import tempfile
import unittest

HANG_REPORT = os.path.join(os.path.dirname(__file__), "..", "hang-report")

SYSTEM_MAP = """\
ffffffff81000000 T _text
ffffffff815d1ba0 T pv_native_safe_halt
ffffffff815d1c00 t nvme_poll_cq
ffffffff815d1d00 D some_data
ffffffff81e00000 T _etext
"""

# As QEMU's "info registers -a" prints them (the lines that matter, and one it adds after RIP).
REGISTERS = """\
CPU#0
RAX=ffff8880f41bb000 RBX=000001f3fffffc18 RCX=4000000000000000 RDX=0000000000000000
RIP=ffffffff815d1bb6 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1
CS =0010 0000000000000000 ffffffff 00af9b00 DPL=0 CS64 [-RA]
CPU#1
RIP=ffffffff815d1c42 RFL=00000086 [--S--P-] CPL=0 II=0 A20=1 SMM=0 HLT=0
CPU#2
RIP=ffffffffc0012345 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=0
CPU#3
RIP=0000564aeb9bb3e8 RFL=00000246 [---Z-P-] CPL=3 II=0 A20=1 SMM=0 HLT=0
"""


def hang_report(registers, system_map=SYSTEM_MAP):
    with tempfile.TemporaryDirectory() as d:
        regs, smap = os.path.join(d, "regs"), os.path.join(d, "System.map")
        with open(regs, "w") as f:
            f.write(registers)
        with open(smap, "w") as f:
            f.write(system_map)
        run = subprocess.run([HANG_REPORT, regs, smap], capture_output=True, text=True)
    return run.returncode, run.stdout.splitlines(), run.stderr


class HangReport(unittest.TestCase):
    def test_places_each_vcpu(self):
        code, lines, err = hang_report(REGISTERS)
        self.assertEqual(code, 0, err)
        self.assertEqual(lines, [
            "CPU#0 pv_native_safe_halt+0x16 (CPL 0, halted)",
            "CPU#1 nvme_poll_cq+0x42 (CPL 0, running)",
            "CPU#2 0xffffffffc0012345 (a module or user address) (CPL 0, running)",
            "CPU#3 0x564aeb9bb3e8 (a module or user address) (CPL 3, running)",
        ])

    def test_a_monitor_that_did_not_answer_fails(self):
        code, lines, err = hang_report("hmp: /cache/run/monitor.sock: timed out\n")
        self.assertEqual(code, 1)
        self.assertEqual(lines, [])
        self.assertIn("no vCPU", err)

    def test_bad_command_line_prints_usage(self):
        run = subprocess.run([HANG_REPORT], capture_output=True, text=True)
        self.assertEqual(run.returncode, 2)
        self.assertIn("tools/hang-report REGISTERS SYSTEM_MAP", run.stderr)


if __name__ == "__main__":
    unittest.main()
