import os
import subprocess
import tempfile
import unittest

from benchlib import hardware
from tests import fixtures

NVME_BIND = os.path.join(os.path.dirname(__file__), "..", "nvme-bind")


class Tree(unittest.TestCase):
    driver = "nvme"

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.sys, self.proc = fixtures.fake_system(self.tmp.name, driver=self.driver)

    def tearDown(self):
        self.tmp.cleanup()

    def nvme_bind(self, *args):
        env = dict(os.environ, SYS=self.sys, PROC=self.proc)
        return subprocess.run(["sh", NVME_BIND, *args], capture_output=True, text=True, env=env)


class Refusals(Tree):
    """nvme-bind's busy-device rules, on a fake sysfs/procfs tree."""

    def assert_refused(self, reason):
        check = self.nvme_bind("--check", fixtures.ADDR)
        self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
        self.assertIn(reason, check.stdout)
        os.makedirs(os.path.join(self.sys, "bus/pci/drivers/nvme_adaptive"))
        bind = self.nvme_bind(fixtures.ADDR, "nvme_adaptive")
        self.assertEqual(bind.returncode, 1)
        self.assertIn("refusing to unbind", bind.stderr)
        self.assertIn(reason, bind.stderr)
        # Nothing was touched.
        self.assertFalse(os.path.exists(os.path.join(self.sys, "bus/pci/drivers/nvme/unbind")))
        self.assertEqual(hardware.driver_of(fixtures.ADDR, self.sys), "nvme")

    def test_free_device_passes(self):
        r = self.nvme_bind("--check", fixtures.ADDR)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("not busy (driver: nvme)", r.stdout)
        env = dict(os.environ, SYS=self.sys, PROC=self.proc)
        self.assertEqual(hardware.busy_reasons(fixtures.ADDR, NVME_BIND, env=env), [])

    def test_mounted_partition(self):
        fixtures.write(os.path.join(self.proc, "self/mountinfo"), "22 1 259:1 / /data rw - xfs /dev/nvme0n1p1 rw")
        self.assert_refused("/dev/nvme0n1p1 holds a mounted filesystem")

    def test_swap(self):
        fixtures.write(os.path.join(self.proc, "swaps"), "Filename Type Size Used Priority\n/dev/nvme0n1 partition 1 0 -2")
        self.assert_refused("/dev/nvme0n1 is active swap")

    def test_md_or_dm_member(self):
        os.makedirs(os.path.join(self.sys, "class/block/nvme0n1/holders/dm-0"))
        self.assert_refused("/dev/nvme0n1 is a member of dm-0")

    def test_open_disk(self):
        os.symlink("/dev/nvme0n1", os.path.join(self.proc, "1/fd/3"))
        self.assert_refused("/dev/nvme0n1 is open by pid 1 (init)")

    def test_open_controller_character_device(self):
        os.symlink("/dev/nvme0", os.path.join(self.proc, "1/fd/4"))
        self.assert_refused("/dev/nvme0 is open by pid 1")

    def test_busy_reasons_reports_them_all(self):
        fixtures.write(os.path.join(self.proc, "swaps"), "Filename Type Size Used Priority\n/dev/nvme0n1p1 partition 1 0 -2")
        os.symlink("/dev/nvme0n1", os.path.join(self.proc, "1/fd/3"))
        env = dict(os.environ, SYS=self.sys, PROC=self.proc)
        reasons = hardware.busy_reasons(fixtures.ADDR, NVME_BIND, env=env)
        self.assertEqual(len(reasons), 2, reasons)


class Listing(Tree):
    def test_lists_each_controller_with_its_driver(self):
        fixtures.write(os.path.join(self.sys, "devices/pci0000:00", fixtures.ADDR, "nvme/nvme0/model"),
                       "QEMU NVMe Ctrl                          ")
        r = self.nvme_bind()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [fixtures.ADDR, "nvme", "nvme0", "QEMU", "NVMe", "Ctrl"])

    def test_unbound_controller_and_other_devices(self):
        os.unlink(os.path.join(self.sys, "devices/pci0000:00", fixtures.ADDR, "driver"))
        other = os.path.join(self.sys, "devices/pci0000:00/0000:00:1f.2")
        os.makedirs(other)
        fixtures.write(os.path.join(other, "class"), "0x010601")
        os.symlink(other, os.path.join(self.sys, "bus/pci/devices/0000:00:1f.2"))
        r = self.nvme_bind()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), 1, r.stdout)
        self.assertEqual(r.stdout.split()[:2], [fixtures.ADDR, "none"])


class Usage(Tree):
    def test_bad_command_lines_print_usage(self):
        for args in ((fixtures.ADDR,), (fixtures.ADDR, "ahci"), ("nonsense", "nvme"), ("--check",)):
            with self.subTest(args=args):
                r = self.nvme_bind(*args)
                self.assertEqual(r.returncode, 2)
                self.assertIn("usage:", r.stderr)

    def test_not_nvme(self):
        fixtures.write(os.path.join(self.sys, "bus/pci/devices", fixtures.ADDR, "class"), "0x010601")
        r = self.nvme_bind("--check", fixtures.ADDR)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not an NVMe controller", r.stderr)
        self.assertIn("not an NVMe controller", hardware.device_problems(fixtures.ADDR, self.sys)[0])

    def test_missing_device(self):
        self.assertEqual(self.nvme_bind("--check", "0000:09:00.0").returncode, 1)
        self.assertEqual(hardware.device_problems("0000:09:00.0", self.sys), ["no PCI device 0000:09:00.0"])


class Persist(Tree):
    """--persist and --unpersist: one udev rule per controller, by address or serial."""

    ABSENT = "0000:09:00.0"  # no device: only the rule is written, nothing is bound now

    def setUp(self):
        super().setUp()
        self.rules = os.path.join(self.tmp.name, "rules.d", "70-nvme-adaptive.rules")

    def run_bind(self, *args):
        env = dict(os.environ, SYS=self.sys, PROC=self.proc, RULES=self.rules, UDEVADM="true")
        return subprocess.run(["sh", NVME_BIND, *args], capture_output=True, text=True, env=env)

    def lines(self):
        with open(self.rules) as f:
            return f.read().splitlines()

    def test_rules_by_address_and_serial(self):
        for args in (("--persist", "09:00.0"), ("--persist", "serial=SN 1.b"), ("--persist", self.ABSENT)):
            r = self.run_bind(*args)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        by_address, by_serial = sorted(self.lines(), key=lambda l: "serial" in l)
        self.assertIn('SUBSYSTEM=="pci", KERNEL=="%s"' % self.ABSENT, by_address)
        self.assertIn('ATTR{driver_override}="nvme_adaptive"', by_address)
        self.assertIn('ACTION=="change", SUBSYSTEM=="nvme", ENV{NVME_EVENT}=="connected", ATTR{serial}=="SN 1.b"',
                      by_serial)
        self.assertTrue(by_address.startswith('ACTION=="add", '), by_address)
        for rule in (by_address, by_serial):
            self.assertRegex(rule, r'RUN\+="/\S*/nvme-bind --udev %k"$')
        self.assertEqual(self.run_bind("--unpersist", self.ABSENT).returncode, 0)
        self.assertEqual(self.lines(), [by_serial])
        self.assertEqual(self.run_bind("--unpersist", "serial=SN 1.b").returncode, 0)
        self.assertFalse(os.path.exists(self.rules))

    def test_bad_targets_print_usage_and_write_nothing(self):
        for args in (("--persist", 'serial=a"b'), ("--persist", "serial="), ("--unpersist", "01:00")):
            with self.subTest(args=args):
                r = self.run_bind(*args)
                self.assertEqual(r.returncode, 2)
                self.assertIn("usage:", r.stderr)
                self.assertFalse(os.path.exists(self.rules))


class DeviceChecks(Tree):
    driver = "ahci"

    def test_foreign_driver_is_refused(self):
        self.assertIn("bound to ahci", hardware.device_problems(fixtures.ADDR, self.sys)[0])

    def test_address_forms(self):
        self.assertEqual(hardware.normalize("01:00.0"), "0000:01:00.0")
        self.assertEqual(hardware.normalize("0000:AB:00.7"), "0000:ab:00.7")
        for bad in ("01:00", "0000:01:00.8", "x", "1:00.0"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                hardware.normalize(bad)


class Describe(Tree):
    def test_model_firmware_link_numa_and_governor(self):
        dev = os.path.join(self.sys, "devices/pci0000:00", fixtures.ADDR)
        for name, value in (("nvme/nvme0/model", "Solidigm SB5PH27X038T               "), ("nvme/nvme0/firmware_rev", "001C"),
                            ("current_link_speed", "16.0 GT/s PCIe"), ("current_link_width", "4"),
                            ("max_link_speed", "32.0 GT/s PCIe"), ("max_link_width", "4"), ("numa_node", "1")):
            fixtures.write(os.path.join(dev, name), value)
        for cpu, gov in (("cpu0", "performance"), ("cpu1", "performance")):
            os.makedirs(os.path.join(self.sys, "devices/system/cpu", cpu, "cpufreq"))
            fixtures.write(os.path.join(self.sys, "devices/system/cpu", cpu, "cpufreq/scaling_governor"), gov)
        self.assertEqual(hardware.describe([fixtures.ADDR], self.sys), {
            "dev0_addr": fixtures.ADDR, "dev0_model": "Solidigm SB5PH27X038T", "dev0_firmware": "001C",
            "dev0_link": "16.0 GT/s PCIe x4", "dev0_max_link": "32.0 GT/s PCIe x4", "dev0_numa_node": "1",
            "cpu_governor": "performance"})

    def test_what_sysfs_lacks_is_left_out(self):
        env = hardware.describe([fixtures.ADDR], self.sys)
        self.assertEqual(env, {"dev0_addr": fixtures.ADDR, "cpu_governor": "none (no cpufreq)"})


class RestoreTree(Tree):
    """Restorer puts controllers back through nvme-bind; a fake nvme-bind records the calls."""

    def setUp(self):
        super().setUp()
        self.calls = os.path.join(self.tmp.name, "calls")
        self.fake = os.path.join(self.tmp.name, "fake-bind")
        fixtures.write(self.fake, '#!/bin/sh\necho "$*" >>%s\n' % self.calls)
        os.chmod(self.fake, 0o755)
        params = os.path.join(self.sys, "module/nvme/parameters")
        os.makedirs(params)
        fixtures.write(os.path.join(params, "poll_queues"), "0")
        self.modules = os.path.join(self.proc, "modules")
        fixtures.write(self.modules, "nvme 1 0 - Live 0x0")

    def recorded(self):
        if not os.path.exists(self.calls):
            return []
        with open(self.calls) as f:
            return f.read().splitlines()


class Restore(RestoreTree):
    def test_rebinds_to_the_original_driver_and_resets_poll_queues(self):
        r = hardware.Restorer([fixtures.ADDR], self.fake, sys_root=self.sys, proc_modules=self.modules)
        fixtures.write(os.path.join(self.sys, "module/nvme/parameters/poll_queues"), "1")
        self.assertEqual(r.restore(), [])
        self.assertEqual(self.recorded(), ["%s none" % fixtures.ADDR, "%s nvme" % fixtures.ADDR])
        with open(os.path.join(self.sys, "module/nvme/parameters/poll_queues")) as f:
            self.assertEqual(f.read().strip(), "0")

    def test_reports_what_it_could_not_restore(self):
        fixtures.write(self.fake, "#!/bin/sh\necho busy >&2; exit 1\n")
        r = hardware.Restorer([fixtures.ADDR], self.fake, sys_root=self.sys, proc_modules=self.modules)
        problems = r.restore()
        self.assertEqual(len(problems), 1)
        self.assertIn("cannot rebind %s to none: busy" % fixtures.ADDR, problems[0])


class UnboundDevice(RestoreTree):
    driver = "none"

    def test_release_clears_a_pending_override(self):
        # Unbound, but set to bind to nvme_adaptive when it loads: "none" must clear that.
        override = os.path.join(self.sys, "bus/pci/devices", fixtures.ADDR, "driver_override")
        fixtures.write(override, "nvme_adaptive")
        run = self.nvme_bind(fixtures.ADDR, "none")
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(override) as f:
            self.assertEqual(f.read().strip(), "")

    def test_unbound_device_stays_unbound(self):
        r = hardware.Restorer([fixtures.ADDR], self.fake, sys_root=self.sys, proc_modules=self.modules)
        self.assertEqual(r.original, {fixtures.ADDR: "none"})
        self.assertEqual(r.restore(), [])
        self.assertEqual(self.recorded(), [])


if __name__ == "__main__":
    unittest.main()
