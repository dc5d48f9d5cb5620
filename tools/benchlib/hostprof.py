"""Where the host's time per I/O goes in an emulated run (tools/bench --host-profile).

perf samples QEMU's threads on the host's clock (a software timer, so any host has it), stamped
with the real-time clock. A sample is counted by the thread it hit, a vCPU ("CPU n/TCG") or any
other of QEMU's (the main loop, which runs the device models and timers, and its workers), and by
the code it hit: the guest's code translated by TCG (perf's map of JIT code), QEMU's own
(the softmmu, helpers, block lookups, device models, with the libraries it calls), or the host
kernel's (wakeups, futexes, eventfds). A measured run's samples are those within its fio job,
whose start and length fio reports on the guest's real-time clock, which the guest takes from the
host at boot; a margin at both ends covers the clocks' difference (the RTC's second).

The guest's instruction counts (--insns) say how much work each driver gives the emulator; this
says what that work, and all the rest, costs the host, and so which kind of cost a repetition that
ran slower paid for.
"""

import bisect
import collections

# perf's sampling rate (Hz): a 3 s run of a busy vCPU gets about 1500 samples.
HZ = 499

# (field, heading): the thread and code of a sample, in table order.
KINDS = (
    ("host_vcpu_translated_us", "vCPU: translated"),
    ("host_vcpu_qemu_us", "vCPU: QEMU"),
    ("host_vcpu_kernel_us", "vCPU: host kernel"),
    ("host_other_qemu_us", "other threads: QEMU"),
    ("host_other_kernel_us", "other threads: host kernel"),
)
FIELDS = tuple(f for f, _ in KINDS) + ("host_us_per_io",)


class Error(Exception):
    pass


def kind(comm, dso):
    """The KINDS field of a sample of thread COMM in object DSO."""
    vcpu = comm.startswith("CPU ") and comm.endswith("/TCG")
    if dso.startswith("[kernel"):
        code = "kernel"
    elif vcpu and (dso.startswith("/tmp/perf-") or dso.startswith("[JIT]") or dso == "//anon"):
        code = "translated"
    else:
        code = "qemu"
    return "host_%s_%s_us" % ("vcpu" if vcpu else "other", code)


def parse_script(lines):
    """[(time in seconds, KINDS field)] sorted by time, from `perf script -G -F comm,time,ip,dso
    --ns` lines: "COMM TIME: IP (DSO)" (COMM may hold spaces)."""
    out = []
    for line in lines:
        head, sep, rest = line.partition(": ")
        if not sep:
            continue
        comm, _, stamp = head.strip().rpartition(" ")
        dso = rest.rsplit("(", 1)[-1].rstrip().rstrip(")") if "(" in rest else ""
        try:
            t = float(stamp)
        except ValueError:
            continue
        out.append((t, kind(comm.strip(), dso)))
    out.sort()
    return out


def window(start_s, runtime_s):
    """The part of a run whose samples count: all but MARGIN at each end (a quarter of the run at
    most)."""
    margin = min(2.0, runtime_s / 4)
    return start_s + margin, start_s + runtime_s - margin


def figures(samples, times, start_s, runtime_s, iops, hz=HZ):
    """{field: microseconds of host time per I/O} of the run of fio job START_S (real-time clock,
    seconds) lasting RUNTIME_S at IOPS, from SAMPLES (parse_script) and their TIMES."""
    lo, hi = window(start_s, runtime_s)
    if hi <= lo or iops <= 0:
        raise Error("no measuring window in a run of %.1f s at %.0f IOPS" % (runtime_s, iops))
    counts = collections.Counter(k for _, k in samples[bisect.bisect_left(times, lo):bisect.bisect_left(times, hi)])
    if not counts:
        raise Error("no perf sample within %.0f..%.0f" % (lo, hi))
    per_io = 1e6 / hz / (iops * (hi - lo))
    out = {f: counts.get(f, 0) * per_io for f, _ in KINDS}
    out["host_us_per_io"] = sum(out[f] for f, _ in KINDS)
    return out


def add_to_samples(samples, lines, hz=HZ):
    """Adds the figures to every sample of a fio job ("job_start_ms", "job_runtime_ms"; t/io_uring
    reports no start, so the peak cell has none); returns the number of fio jobs without perf
    samples in their window."""
    parsed = parse_script(lines)
    times = [t for t, _ in parsed]
    missing = 0
    for s in samples:
        start, runtime = s.get("job_start_ms"), s.get("job_runtime_ms")
        if not start or not runtime:
            continue
        try:
            s.update(figures(parsed, times, start / 1000.0, runtime / 1000.0, s.get("iops") or 0, hz))
        except Error:
            missing += 1
    return missing
