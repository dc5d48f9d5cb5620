"""Real-hardware mode: the checks made before anything is touched, and putting every controller
back where it was found."""

import glob
import os
import re
import subprocess

NVME_CLASS = "0x010802"
PCI_ADDR = re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def normalize(addr):
    """ "01:00.0" -> "0000:01:00.0"; ValueError if it is not a PCI address."""
    if not PCI_ADDR.match(addr):
        raise ValueError("'%s' is not a PCI address (like 0000:01:00.0)" % addr)
    addr = addr.lower()
    return addr if addr.count(":") == 2 else "0000:" + addr


def driver_of(addr, sys_root="/sys"):
    link = os.path.join(sys_root, "bus/pci/devices", addr, "driver")
    return os.path.basename(os.readlink(link)) if os.path.islink(link) else "none"


def device_problems(addr, sys_root="/sys"):
    """Why ADDR cannot be benchmarked, as a list of messages (empty if it can)."""
    dev = os.path.join(sys_root, "bus/pci/devices", addr)
    if not os.path.isdir(dev):
        return ["no PCI device %s" % addr]
    with open(os.path.join(dev, "class")) as f:
        cls = f.read().strip()
    if cls != NVME_CLASS:
        return ["%s is not an NVMe controller (class %s, expected %s)" % (addr, cls, NVME_CLASS)]
    drv = driver_of(addr, sys_root)
    if drv not in ("nvme", "nvme_adaptive", "none"):
        return ["%s is bound to %s, not nvme or nvme_adaptive" % (addr, drv)]
    return []


def busy_reasons(addr, nvme_bind, env=None):
    """nvme-bind's reasons why the controller must not be unbound (mounts, swap, holders, open
    handles), as a list; empty if it is free."""
    r = subprocess.run([nvme_bind, "--check", addr], capture_output=True, text=True, env=env)
    if r.returncode == 0:
        return []
    lines = (r.stdout + r.stderr).strip().splitlines()
    return lines or ["nvme-bind --check %s failed (exit %d)" % (addr, r.returncode)]


def module_problems(ko, release):
    """Why KO cannot be loaded into the running kernel RELEASE, as a list."""
    if not os.path.isfile(ko):
        return ["module %s not found; build it with: make KDIR=/lib/modules/%s/build" % (ko, release)]
    r = subprocess.run(["modinfo", "-F", "vermagic", ko], capture_output=True, text=True)
    if r.returncode != 0:
        return ["%s is not a kernel module: %s" % (ko, r.stderr.strip())]
    built_for = r.stdout.split()[0] if r.stdout.split() else "?"
    if built_for != release:
        return ["%s was built for kernel %s, this is %s; rebuild with make KDIR=/lib/modules/%s/build" % (ko, built_for, release, release)]
    return []


class Restorer:
    """Remembers how the controllers and the stock driver's poll_queues were set up, and puts
    them back: each controller to its original driver, nvme_adaptive unloaded if we loaded it."""

    def __init__(self, addrs, nvme_bind, sys_root="/sys", proc_modules="/proc/modules"):
        self.nvme_bind = nvme_bind
        self.sys_root = sys_root
        self.original = {a: driver_of(a, sys_root) for a in addrs}
        self.poll_queues = _read(self._poll_queues_path())
        with open(proc_modules) as f:
            self.adaptive_loaded = any(line.startswith("nvme_adaptive ") for line in f)

    def _poll_queues_path(self):
        return os.path.join(self.sys_root, "module/nvme/parameters/poll_queues")

    def restore(self):
        """Returns the problems met (empty when everything is back)."""
        problems = []
        path = self._poll_queues_path()
        if self.poll_queues is not None and _read(path) != self.poll_queues:
            try:
                with open(path, "w") as f:
                    f.write(self.poll_queues)
            except OSError as e:
                problems.append("cannot restore nvme poll_queues=%s: %s" % (self.poll_queues, e))
        for addr, drv in self.original.items():
            # A controller found on nvme is probed again even if it is on nvme now: it may have
            # been probed with the benchmark's poll_queues.
            steps = ("none", drv) if drv != "none" else ("none",)
            if drv != "nvme" and driver_of(addr, self.sys_root) == drv:
                steps = ()
            for step in steps:
                r = subprocess.run([self.nvme_bind, addr, step], capture_output=True, text=True)
                if r.returncode != 0:
                    problems.append("cannot rebind %s to %s: %s" % (addr, step, (r.stdout + r.stderr).strip()))
                    break
        if not self.adaptive_loaded and os.path.isdir(os.path.join(self.sys_root, "module/nvme_adaptive")):
            r = subprocess.run(["rmmod", "nvme_adaptive"], capture_output=True, text=True)
            if r.returncode != 0:
                problems.append("cannot unload nvme_adaptive: %s" % r.stderr.strip())
        return problems


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def describe(addrs, sys_root="/sys"):
    """The record of the hardware a result came from: per controller its model, firmware, PCIe
    link (current and maximum) and NUMA node, and the CPUs' frequency governors. Fields sysfs does
    not have (a controller bound to no NVMe driver has no model) are left out."""
    env = {}
    for i, addr in enumerate(addrs):
        dev = os.path.join(sys_root, "bus/pci/devices", addr)
        env["dev%d_addr" % i] = addr
        ctrls = sorted(os.listdir(os.path.join(dev, "nvme"))) if os.path.isdir(os.path.join(dev, "nvme")) else []
        if ctrls:
            for field, name in (("model", "model"), ("firmware_rev", "firmware")):
                value = _read(os.path.join(dev, "nvme", ctrls[0], field))
                if value is not None:
                    env["dev%d_%s" % (i, name)] = value
        for kind in ("current", "max"):
            speed, width = _read(os.path.join(dev, kind + "_link_speed")), _read(os.path.join(dev, kind + "_link_width"))
            if speed or width:
                env["dev%d_%s" % (i, "link" if kind == "current" else "max_link")] = "%s x%s" % (speed, width)
        numa = _read(os.path.join(dev, "numa_node"))
        if numa is not None:
            env["dev%d_numa_node" % i] = numa
    governors = set()
    for path in sorted(glob.glob(os.path.join(sys_root, "devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"))):
        value = _read(path)
        if value:
            governors.add(value)
    env["cpu_governor"] = "+".join(sorted(governors)) or "none (no cpufreq)"
    return env
