"""Turns bench-run's output (a guest console log, or its stdout on real hardware) into samples.

One sample per measured cell: fio's (or t/io_uring's) figures plus the deltas of the interrupt,
CPU, disk and driver counters taken around the run. Keys starting with "_" (the tool's raw
output, fio's latency histogram) are for the report and the raw files, not for results.json.
"""

import json
import re

# Dominant direction of each workload: its latency percentiles are reported.
DIRECTION = {"randread": "read", "randwrite": "write", "randrw70": "read", "peak": "read"}

# /proc/stat "cpu" fields, in order, in USER_HZ ticks.
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq")
USER_HZ = 100


class ParseError(Exception):
    pass


def parse_kv(text):
    """ "a=1 b=x" -> {"a": "1", "b": "x"} """
    out = {}
    for item in text.split():
        if "=" in item:
            k, v = item.split("=", 1)
            out[k] = v
    return out


def interrupt_counts(lines):
    """Per-line totals of a /proc/interrupts snapshot: {name: count}.

    Device lines are keyed by their last field (the action name, e.g. "nvma0q1"); the
    architecture lines by their label ("LOC"). Counts are summed over the CPU columns.
    """
    if not lines:
        return {}
    ncpu = len(lines[0].split())
    counts = {}
    for line in lines[1:]:
        fields = line.split()
        if not fields or not fields[0].endswith(":"):
            continue
        per_cpu = []
        for f in fields[1:1 + ncpu]:
            if not f.isdigit():
                break
            per_cpu.append(int(f))
        label = fields[0][:-1]
        key = label if not label.isdigit() else fields[-1]
        counts[key] = counts.get(key, 0) + sum(per_cpu)
    return counts


def device_irqs(counts, controllers):
    """Interrupts of the I/O queue vectors (queue 0, the admin queue, excluded)."""
    pat = re.compile(r"^(%s)q([1-9][0-9]*)$" % "|".join(re.escape(c) for c in controllers))
    return sum(n for name, n in counts.items() if pat.match(name))


def cpu_and_ctxt(lines):
    """From /proc/stat lines: ({field: ticks}, context switches)."""
    cpu, ctxt = {}, 0
    for line in lines:
        fields = line.split()
        if fields[0] == "cpu":
            cpu = dict(zip(CPU_FIELDS, (int(x) for x in fields[1:1 + len(CPU_FIELDS)])))
        elif fields[0] == "ctxt":
            ctxt = int(fields[1])
    return cpu, ctxt


def debugfs_sums(lines):
    """nvme_adaptive statistics lines "CTRL QUEUE key: value" summed over queues: {key: total}."""
    sums = {}
    for line in lines:
        fields = line.split()
        if len(fields) == 4 and fields[2].endswith(":") and fields[3].isdigit():
            key = fields[2][:-1]
            sums[key] = sums.get(key, 0) + int(fields[3])
    return sums


def diskstats_ios(lines):
    """Completed reads plus writes of the disks in "NVA-BENCH-RAW diskstats DISK <stat fields>"
    lines (/sys/block/DISK/stat: reads completed is field 1, writes completed field 5)."""
    total = 0
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1].isdigit() and fields[5].isdigit():
            total += int(fields[1]) + int(fields[5])
    return total


def uptime(lines):
    """Seconds since boot from a /proc/uptime line, or None."""
    try:
        return float(lines[0].split()[0])
    except (IndexError, ValueError):
        return None


class Snapshot:
    KINDS = ("interrupts", "stat", "debugfs", "uptime", "diskstats")

    def __init__(self):
        self.interrupts = []
        self.stat = []
        self.debugfs = []
        self.uptime = []
        self.diskstats = []

    def add(self, kind, text):
        getattr(self, kind).append(text)


def fio_figures(fio, workload):
    """IOPS, I/Os and latency (microseconds) of a group-reported fio JSON run; with fio's json+
    output also the completion latency histogram ("_bins": {latency ns: I/Os})."""
    try:
        job = fio["jobs"][0]
    except (KeyError, IndexError, TypeError) as e:
        raise ParseError("fio JSON has no job") from e
    direction = DIRECTION.get(workload, "read")
    iops = job["read"]["iops"] + job["write"]["iops"]
    ios = job["read"]["total_ios"] + job["write"]["total_ios"]
    clat = job[direction]["clat_ns"]
    pct = clat.get("percentile", {})

    def p(q):
        v = pct.get("%.6f" % q)
        return v / 1000.0 if v is not None else None

    out = {
        "iops": iops,
        "ios": ios,
        "lat_mean_us": clat["mean"] / 1000.0,
        "lat_p50_us": p(50),
        "lat_p99_us": p(99),
        "lat_p999_us": p(99.9),
        "lat_p9999_us": p(99.99),
        "lat_max_us": clat["max"] / 1000.0 if "max" in clat else None,
        # When the job ran, on the guest's real-time clock (tools/bench --host-profile).
        "job_start_ms": job.get("job_start"),
        "job_runtime_ms": job.get("job_runtime"),
        "fio_usr_cpu": job["usr_cpu"],
        "fio_sys_cpu": job["sys_cpu"],
        "fio_error": job.get("error", 0),
    }
    if "bins" in clat:
        out["_bins"] = {int(k): v for k, v in clat["bins"].items()}
    return out


IOPS_LINE = re.compile(r"^IOPS=([0-9.]+)([KM]?),")


def io_uring_figures(lines):
    """IOPS of a t/io_uring run from its once-a-second "IOPS=..., BW=..., IOS/call=s/c" lines:
    the mean of the seconds after the first (the ring filling up), or of all when fewer than
    three were printed. Its own I/O count is incomplete (the last second is never printed):
    the per-I/O figures use the disks' statistics instead."""
    per_second = []
    for line in lines:
        m = IOPS_LINE.match(line.strip())
        if m:
            per_second.append(float(m[1]) * {"": 1, "K": 1e3, "M": 1e6}[m[2]])
    if not per_second:
        raise ParseError("t/io_uring printed no IOPS line")
    steady = per_second[1:] if len(per_second) >= 3 else per_second
    return {"iops": sum(steady) / len(steady), "iops_per_second": per_second}


def counter_figures(before, after, controllers, ios):
    """Per-I/O rates from the counter deltas; IOPS per CPU core is I/Os per busy CPU second."""
    ib, ia = interrupt_counts(before.interrupts), interrupt_counts(after.interrupts)
    (cb, xb), (ca, xa) = cpu_and_ctxt(before.stat), cpu_and_ctxt(after.stat)
    db, da = debugfs_sums(before.debugfs), debugfs_sums(after.debugfs)
    dev = device_irqs(ia, controllers) - device_irqs(ib, controllers)
    loc = ia.get("LOC", 0) - ib.get("LOC", 0)
    delta = {k: ca.get(k, 0) - cb.get(k, 0) for k in CPU_FIELDS}
    busy = sum(v for k, v in delta.items() if k not in ("idle", "iowait"))
    n = max(ios, 1)

    def d(key):
        return da.get(key, 0) - db.get(key, 0)

    completed = d("completed")
    tb, ta = uptime(before.uptime), uptime(after.uptime)
    return {
        "elapsed_s": ta - tb if tb is not None and ta is not None else None,
        "disk_ios": diskstats_ios(after.diskstats) - diskstats_ios(before.diskstats) if after.diskstats else None,
        "iops_per_core": ios * USER_HZ / busy if busy > 0 else None,
        "device_irqs": dev,
        "local_timer_irqs": loc,
        "irqs_per_io": dev / n,
        "loc_per_io": loc / n,
        "interrupts_per_io": (dev + loc) / n,
        "ctx_per_io": (xa - xb) / n,
        "cpu_us_per_io": busy * 1e6 / USER_HZ / n,
        "irq_cpu_us_per_io": (delta["irq"] + delta["softirq"]) * 1e6 / USER_HZ / n,
        "poll_timer_per_io": d("timer_expiries") / n,
        "polled_share": d("reaped_poll") / completed if completed > 0 else None,
        "episodes": d("episodes"),
    }


def parse_log(text):
    """All samples, the environment line and error lines of a bench-run output."""
    samples, errors, env = [], [], {}
    cell = None
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if line.startswith("NVA-BENCH-ENV "):
            env.update(parse_kv(line[len("NVA-BENCH-ENV "):]))
        elif line.startswith("NVA-BENCH-ENV-TEXT "):
            key, _, value = line[len("NVA-BENCH-ENV-TEXT "):].partition(" ")
            env[key] = value.strip()
        elif line.startswith("NVA-BENCH-ERROR "):
            errors.append(line[len("NVA-BENCH-ERROR "):])
        elif line.startswith("NVA-BENCH-BEGIN "):
            cell = {"meta": parse_kv(line[len("NVA-BENCH-BEGIN "):]), "json": [], "snap": {}, "ksyms": []}
            snap = None
        elif cell is None:
            continue
        elif line.startswith("NVA-BENCH-SNAPSHOT "):
            snap = Snapshot()
            cell["snap"][line.split()[1]] = snap
        elif line.startswith("NVA-BENCH-RAW "):
            kind, _, rest = line[len("NVA-BENCH-RAW "):].partition(" ")
            if snap is not None and kind in Snapshot.KINDS:
                snap.add(kind, rest)
        elif line.startswith("NVA-BENCH-KSYM "):
            cell["ksyms"].append(line[len("NVA-BENCH-KSYM "):])
        elif line.startswith("NVA-BENCH-END"):
            samples.append(make_sample(cell))
            cell = None
        elif not cell["snap"]:
            cell["json"].append(line)
    return samples, env, errors


def default_cpus(jobs):
    """The placement of logs written before placements existed: bench-run pinned the jobs to CPU
    1, then CPU 0."""
    return "1" if jobs == 1 else ",".join(str(c) for c in range(jobs))


def make_sample(cell):
    meta = cell["meta"]
    if "before" not in cell["snap"] or "after" not in cell["snap"]:
        raise ParseError("cell %s: counter snapshots missing" % meta)
    jobs = int(meta["jobs"])
    sample = {
        "driver": meta["driver"],
        "workload": meta["workload"],
        "qd": int(meta["qd"]),
        "jobs": jobs,
        "cpus": meta.get("cpus", default_cpus(jobs)),
        "ctrls": int(meta["ctrls"]),
        "rep": int(meta["rep"]),
        "runtime": int(meta["runtime"]),
        "rate": int(meta.get("rate", 0)),
        "rate_iops": int(meta.get("rate_iops", 0)) or None,
        "tool": meta.get("tool", "fio"),
        "cell": int(meta["cell"]) if "cell" in meta else None,
        "_raw": "\n".join(cell["json"]) + "\n",
        "_ksyms": cell["ksyms"],
    }
    before, after = cell["snap"]["before"], cell["snap"]["after"]
    if sample["tool"] == "t-io_uring":
        sample.update(io_uring_figures(cell["json"]))
        sample["ios"] = diskstats_ios(after.diskstats) - diskstats_ios(before.diskstats)
        if sample["ios"] <= 0:
            raise ParseError("cell %s: the disks' statistics show no I/O" % meta)
    else:
        try:
            fio = json.loads(sample["_raw"])
        except json.JSONDecodeError as e:
            raise ParseError("cell %s: fio output is not JSON: %s" % (meta, e)) from e
        sample.update(fio_figures(fio, sample["workload"]))
    controllers = [c for c in meta.get("controllers", "").split(",") if c]
    sample.update(counter_figures(before, after, controllers, sample["ios"]))
    return sample
