"""Shared test data: a fake sysfs/procfs tree with one NVMe controller, and bench-run output."""

import importlib.machinery
import importlib.util
import json
import os

ADDR = "0000:01:00.0"


def fake_system(root, driver="nvme", cls="0x010802"):
    """Builds ROOT/sys and ROOT/proc holding one controller at ADDR with disk nvme0n1 (259:0),
    partition nvme0n1p1 (259:1) and character device nvme0 (242:0). Returns (sys, proc)."""
    sys_root, proc = os.path.join(root, "sys"), os.path.join(root, "proc")
    dev = os.path.join(sys_root, "devices/pci0000:00", ADDR)
    ctrl = os.path.join(dev, "nvme/nvme0")
    disk = os.path.join(ctrl, "nvme0n1")
    part = os.path.join(disk, "nvme0n1p1")
    for d in (part, os.path.join(disk, "holders"), os.path.join(part, "holders"),
              os.path.join(sys_root, "bus/pci/devices"), os.path.join(sys_root, "class/block"),
              os.path.join(sys_root, "class/nvme"), os.path.join(sys_root, "bus/pci/drivers", driver),
              os.path.join(proc, "self"), os.path.join(proc, "1/fd")):
        os.makedirs(d, exist_ok=True)
    write(os.path.join(dev, "class"), cls)
    write(os.path.join(disk, "dev"), "259:0")
    write(os.path.join(part, "dev"), "259:1")
    write(os.path.join(ctrl, "dev"), "242:0")
    os.symlink(dev, os.path.join(sys_root, "bus/pci/devices", ADDR))
    os.symlink(disk, os.path.join(sys_root, "class/block/nvme0n1"))
    os.symlink(part, os.path.join(sys_root, "class/block/nvme0n1p1"))
    os.symlink(ctrl, os.path.join(sys_root, "class/nvme/nvme0"))
    if driver != "none":
        os.symlink(os.path.join(sys_root, "bus/pci/drivers", driver), os.path.join(dev, "driver"))
    write(os.path.join(proc, "self/mountinfo"), "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n")
    write(os.path.join(proc, "swaps"), "Filename\tType\tSize\tUsed\tPriority\n")
    write(os.path.join(proc, "1/comm"), "init")
    return sys_root, proc


def write(path, text):
    with open(path, "w") as f:
        f.write(text + ("\n" if not text.endswith("\n") else ""))


def fio_json(iops=1000.0, ios=5000, write_iops=0.0, write_ios=0, p99=250000):
    clat = {"mean": 120000.0, "percentile": {"50.000000": 100000, "99.000000": p99, "99.900000": 400000}}
    return {
        "fio version": "fio-3.39",
        "jobs": [{
            "jobname": "bench", "error": 0, "usr_cpu": 5.0, "sys_cpu": 20.0,
            "read": {"iops": iops, "total_ios": ios, "clat_ns": clat},
            "write": {"iops": write_iops, "total_ios": write_ios, "clat_ns": dict(clat, mean=90000.0)},
        }],
    }


INTERRUPTS_HEAD = "           CPU0       CPU1       "


def interrupts(q1, q2, loc, admin=5):
    return [
        INTERRUPTS_HEAD,
        " 24:  %10d          0  PCI-MSIX-0000:00:04.0    0-edge      nvma0q0" % admin,
        " 25:  %10d          0  PCI-MSIX-0000:00:04.0    1-edge      nvma0q1" % q1,
        " 26:           0 %10d  PCI-MSIX-0000:00:04.0    2-edge      nvma0q2" % q2,
        " 27:         100          0  PCI-MSIX-0000:00:05.0    1-edge      nvma1q1",
        "LOC:  %10d %10d   Local timer interrupts" % (loc, loc),
        "ERR:          0",
    ]


def bench_output(cells, cpus="1", rate=0, tool="fio", tool_output=None, disk_ios=0):
    """bench-run output for CELLS: [(driver, qd, iops, dev_irqs, loc, reaped_poll, completed, ticks)]."""
    out = ["NVA-BENCH-ENV kernel=7.3.4 cpus=2 fio=fio-3.39", "NVA-BENCH-ENV-TEXT cpu_model QEMU TCG CPU"]
    jobs = len(cpus.split(","))
    workload = "peak" if tool == "t-io_uring" else "randread"
    for i, (driver, qd, iops, irqs, loc, polled, completed, ticks) in enumerate(cells):
        ios = int(iops * 5)
        out.append("NVA-BENCH-PROGRESS %d %d driver=%s" % (i + 1, len(cells), driver))
        out.append("NVA-BENCH-BEGIN rep=1 driver=%s workload=%s qd=%d jobs=%d cpus=%s ctrls=1 runtime=5 rate=%d "
                   "rate_iops=%d tool=%s controllers=nvma0" % (driver, workload, qd, jobs, cpus, rate, iops * rate // 100, tool))
        out.extend(tool_output or json.dumps(fio_json(iops=iops, ios=ios), indent=1).splitlines())
        for when, scale in (("before", 0), ("after", 1)):
            out.append("NVA-BENCH-SNAPSHOT " + when)
            out.append("NVA-BENCH-RAW uptime %.2f 100.00" % (50 + 5 * scale))
            out.append("NVA-BENCH-RAW diskstats nvma0n1 %d 0 0 0 0 0 0 0 0 0 0" % (100 + scale * disk_ios))
            out.extend("NVA-BENCH-RAW interrupts " + line for line in interrupts(1000 + scale * irqs, 0, 500 + scale * loc))
            out.append("NVA-BENCH-RAW stat cpu  %d 0 %d %d 0 0 0 0 0 0" % (100 + scale * ticks, 200 + scale * ticks, 1000))
            out.append("NVA-BENCH-RAW stat ctxt %d" % (50 + scale * ios))
            out.append("NVA-BENCH-RAW debugfs nvma0 q1 completed: %d" % (10 + scale * completed))
            out.append("NVA-BENCH-RAW debugfs nvma0 q1 reaped_poll: %d" % (scale * polled))
            out.append("NVA-BENCH-RAW debugfs nvma0 q1 stage: sample")
        out.append("NVA-BENCH-END")
    return "\n".join(out) + "\n"


def load_script(name):
    """Imports the tools/ script NAME (a Python file without the .py suffix) as a module."""
    path = os.path.join(os.path.dirname(__file__), "..", name)
    loader = importlib.machinery.SourceFileLoader(name + "_cli", path)
    spec = importlib.util.spec_from_loader(name + "_cli", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
