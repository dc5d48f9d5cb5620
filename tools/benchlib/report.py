"""Aggregates samples per cell (median and spread over repetitions), compares each configuration
with the stock driver, and writes the JSON, the Markdown tables and the plots.

A cell key is (workload, cpus, ctrls, qd, rate, driver); rate 0 is an unthrottled cell, otherwise
the offered load of an equal-load cell in percent of stock's IOPS.
"""

import json
import math
import os
import statistics

from . import hostprof, matrix

LABELS = {
    "stock": "nvme (interrupts)",
    "stock-poll": "nvme poll_queues + hipri",
    "adaptive-poll": "nvme_adaptive poll_queues + hipri",
    "adaptive-off": "nvme_adaptive, adaptive off",
    "adaptive-on": "nvme_adaptive, adaptive on",
}
# Drivers in the order tables and plots show them, with their labels.
DRIVERS = [(d, LABELS[d]) for d in matrix.DRIVERS]


def driver_rank(driver):
    """A driver's place in that order (unknown ones last)."""
    return matrix.DRIVERS.index(driver) if driver in matrix.DRIVERS else len(matrix.DRIVERS)


def cell_order(key):
    """Sort key of a cell across groups: workload, placement, controllers, QD, then driver."""
    return key[0], key[1], key[2], key[3], driver_rank(key[5])


# Figures aggregated per cell.
METRICS = [
    "iops",
    "iops_per_core",
    "lat_mean_us",
    "lat_p50_us",
    "lat_p99_us",
    "lat_p999_us",
    "lat_p9999_us",
    "lat_max_us",
    "irqs_per_io",
    "loc_per_io",
    "interrupts_per_io",
    "poll_timer_per_io",
    "cpu_us_per_io",
    "ctx_per_io",
    "polled_share",
    "fio_usr_cpu",
    "fio_sys_cpu",
    "rate_iops",
    "insns_per_io",
    "kernel_insns_per_io",
    "driver_insns_per_io",
    "blocks_per_io",
    "driver_blocks_per_io",
    "distinct_blocks",
    "driver_distinct_blocks",
    "locked_per_io",
    "fences_per_io",
    "tsc_per_io",
    "pauses_per_io",
    "msr_per_io",
    "pio_insns_per_io",
    "indirect_per_io",
    "nvme_reads_per_io",
    "nvme_writes_per_io",
    "msix_per_io",
    "apic_per_io",
    "other_mmio_per_io",
    "cfg_per_io",
    "msix_messages_per_io",
] + list(hostprof.FIELDS)

# The columns of the host-cost accounting (tools/bench --insns): metric, heading, decimals.
ACCOUNTING = (
    ("insns_per_io", "insns", 0),
    ("driver_insns_per_io", "driver insns", 0),
    ("blocks_per_io", "blocks", 0),
    ("driver_blocks_per_io", "driver blocks", 1),
    ("driver_distinct_blocks", "driver distinct", 0),
    ("nvme_reads_per_io", "BAR reads", 2),
    ("nvme_writes_per_io", "BAR writes", 2),
    ("msix_per_io", "MSI-X table", 2),
    ("apic_per_io", "APIC", 2),
    ("other_mmio_per_io", "other MMIO/PIO", 2),
    ("cfg_per_io", "config", 2),
    ("msix_messages_per_io", "MSI-X msgs", 2),
    ("locked_per_io", "locked", 1),
    ("fences_per_io", "fences", 2),
    ("tsc_per_io", "rdtsc", 2),
    ("pauses_per_io", "pause", 2),
    ("msr_per_io", "MSR", 2),
    ("pio_insns_per_io", "port I/O", 2),
    ("indirect_per_io", "indirect", 1),
)

# The precision target: max/min of a cell's repetitions, for IOPS and interrupts per I/O.
SPREAD_TARGET = 0.03


def cell_key(s):
    return (s["workload"], s.get("cpus") or "1", s["ctrls"], s["qd"], s.get("rate", 0), s["driver"])


def summarize(samples):
    """{cell key: {metric: {"median", "min", "max", "n", "spread"}}} over the repetitions of each
    cell; spread is max/min - 1 (None when min is 0 or there is one repetition)."""
    cells = {}
    for s in samples:
        cells.setdefault(cell_key(s), []).append(s)
    out = {}
    for key, group in cells.items():
        m = {}
        for metric in METRICS:
            values = [s[metric] for s in group if s.get(metric) is not None]
            if values:
                lo, hi = min(values), max(values)
                m[metric] = {
                    "median": statistics.median(values),
                    "min": lo,
                    "max": hi,
                    "n": len(values),
                    "spread": hi / lo - 1 if len(values) > 1 and lo > 0 else None,
                }
        out[key] = m
    return out


def ratio(summary, key, metric, baseline="stock"):
    """median(metric) of the cell divided by the stock driver's in the same cell, or None."""
    base = summary.get(key[:-1] + (baseline,), {}).get(metric)
    mine = summary.get(key, {}).get(metric)
    if not base or not mine or base["median"] == 0:
        return None
    return mine["median"] / base["median"]


def groups(summary, kind):
    """The (workload, cpus, ctrls) groups of one kind of cell ("sweep", "peak" or "rate"), in a
    stable order."""
    return sorted({k[:3] for k in summary if kind_of(k) == kind})


def kind_of(key):
    if key[4]:
        return "rate"
    return "peak" if key[0] == "peak" else "sweep"


def fmt(v, digits=0):
    if v is None:
        return "–"
    return "%.*f" % (digits, v)


def spread(m, metric):
    v = m.get(metric, {}).get("spread")
    return "–" if v is None else "%.1f%%" % (100 * v)


def share(m):
    v = m.get("polled_share")
    return "%d%%" % round(100 * v["median"]) if v else "–"


def group_title(workload, cpus, ctrls):
    return "%s, %s, %d controller%s" % (workload, matrix.placement_label(cpus), ctrls, "s" if ctrls > 1 else "")


def rows(summary, group, kind):
    """(key, label, figures) of every driver of a group's cells of one kind, by QD and rate."""
    keys = sorted(k for k in summary if k[:3] == group and kind_of(k) == kind)
    for key in sorted(keys, key=lambda k: (k[3], k[4], driver_rank(k[5]))):
        yield key, LABELS.get(key[5], key[5]), summary[key]


def med(m, metric, digits=0):
    return fmt(m[metric]["median"], digits) if metric in m else "–"


def sweep_table(summary, group):
    lines = ["### %s" % group_title(*group), "",
             "| QD | configuration | IOPS (min–max) | spread | × stock | p50 µs | p99 µs | p99.9 µs | dev IRQ/IO "
             "| timer IRQ/IO | all IRQ/IO | spread | × stock | CPU µs/IO | ctx/IO | polled |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, label, m in rows(summary, group, "sweep"):
        iops = m["iops"]
        lines.append("| %d | %s | %s (%s–%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            key[3], label, fmt(iops["median"]), fmt(iops["min"]), fmt(iops["max"]), spread(m, "iops"),
            fmt(ratio(summary, key, "iops"), 2), med(m, "lat_p50_us"), med(m, "lat_p99_us"), med(m, "lat_p999_us"),
            med(m, "irqs_per_io", 3), med(m, "loc_per_io", 3), med(m, "interrupts_per_io", 3),
            spread(m, "interrupts_per_io"), fmt(ratio(summary, key, "interrupts_per_io"), 2),
            med(m, "cpu_us_per_io", 1), med(m, "ctx_per_io", 2), share(m)))
    return lines


def peak_table(summary, group):
    workload, cpus, ctrls = group
    lines = ["### peak: t/io_uring -d%d -s32 -c32 -b4096 -B1 -F1, %s, %d controller%s"
             % (matrix.PEAK_QD, matrix.placement_label(cpus), ctrls, "s" if ctrls > 1 else ""), "",
             "| QD | configuration | polled | IOPS (min–max) | spread | × stock | IOPS/core | × stock | dev IRQ/IO "
             "| all IRQ/IO | spread | × stock | CPU µs/IO | polled |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, label, m in rows(summary, group, "peak"):
        iops = m["iops"]
        lines.append("| %d | %s | %s | %s (%s–%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            key[3], label, "-p1" if key[5] in matrix.POLLED else "-p0",
            fmt(iops["median"]), fmt(iops["min"]), fmt(iops["max"]), spread(m, "iops"),
            fmt(ratio(summary, key, "iops"), 2), med(m, "iops_per_core"), fmt(ratio(summary, key, "iops_per_core"), 2),
            med(m, "irqs_per_io", 3), med(m, "interrupts_per_io", 3), spread(m, "interrupts_per_io"),
            fmt(ratio(summary, key, "interrupts_per_io"), 2), med(m, "cpu_us_per_io", 1), share(m)))
    return lines


def rate_tables(summary, group):
    lines = []
    for qd in sorted({k[3] for k in summary if k[:3] == group and kind_of(k) == "rate"}):
        base = summary.get(group + (qd, 0, "stock"), {}).get("iops")
        lines += ["### Equal-load latency: %s, QD %d%s" % (
            group_title(*group), qd,
            " (stock's IOPS at QD %d: %s = 100%%)" % (qd, fmt(base["median"])) if base else ""), "",
            "| load | configuration | offered IOPS | IOPS | p50 µs | p99 µs | p99.9 µs | p99.99 µs | max µs "
            "| dev IRQ/IO | all IRQ/IO | spread | × stock | CPU µs/IO | polled |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for key, label, m in rows(summary, group, "rate"):
            if key[3] != qd:
                continue
            lines.append("| %d%% | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                key[4], label, med(m, "rate_iops"), med(m, "iops"), med(m, "lat_p50_us"), med(m, "lat_p99_us"),
                med(m, "lat_p999_us"), med(m, "lat_p9999_us"), med(m, "lat_max_us"), med(m, "irqs_per_io", 3),
                med(m, "interrupts_per_io", 3), spread(m, "interrupts_per_io"),
                fmt(ratio(summary, key, "interrupts_per_io"), 2), med(m, "cpu_us_per_io", 1), share(m)))
        lines.append("")
    return lines


def insns_table(summary):
    """Guest instructions per I/O (tools/bench --insns) of every unthrottled cell: all of them, the
    kernel's and the driver's, with their spreads and ratios to stock."""
    keys = [k for k in summary if kind_of(k) != "rate" and "insns_per_io" in summary[k]]
    if not keys:
        return []
    lines = ["### Guest instructions per I/O (QEMU's count)", "",
             "| cell | configuration | all (min–max) | spread | × stock | kernel | × stock "
             "| driver (min–max) | spread | × stock |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key in sorted(keys, key=cell_order):
        m = summary[key]
        a, d = m["insns_per_io"], m["driver_insns_per_io"]
        lines.append("| %s QD %d, %s, %d ctrl | %s | %s (%s–%s) | %s | %s | %s | %s | %s (%s–%s) | %s | %s |" % (
            key[0], key[3], matrix.placement_label(key[1]), key[2], LABELS.get(key[5], key[5]),
            fmt(a["median"]), fmt(a["min"]), fmt(a["max"]), spread(m, "insns_per_io"),
            fmt(ratio(summary, key, "insns_per_io"), 2), med(m, "kernel_insns_per_io"),
            fmt(ratio(summary, key, "kernel_insns_per_io"), 2),
            fmt(d["median"]), fmt(d["min"]), fmt(d["max"]), spread(m, "driver_insns_per_io"),
            fmt(ratio(summary, key, "driver_insns_per_io"), 2)))
    return lines + [""]


def accounting_table(summary):
    """What each unthrottled cell costs the host per I/O (medians over the repetitions): guest
    instructions and translated blocks, all and the driver's; accesses that leave translated code
    for QEMU's device models, by region; config space accesses; MSI-X messages; and the
    instructions TCG runs through helpers, by kind."""
    keys = [k for k in summary if kind_of(k) != "rate" and "blocks_per_io" in summary[k]]
    if not keys:
        return []
    head = "| cell | configuration | " + " | ".join(h for _, h, _ in ACCOUNTING) + " |"
    lines = ["### Host costs per I/O (QEMU's counts)", "", head,
             "|---|---|" + "---:|" * len(ACCOUNTING)]
    for key in sorted(keys, key=cell_order):
        m = summary[key]
        values = []
        for metric, _, decimals in ACCOUNTING:
            v = m.get(metric, {}).get("median")
            values.append("–" if v is None else "%.*f" % (decimals, v))
        lines.append("| %s QD %d, %s, %d ctrl | %s | %s |" % (
            key[0], key[3], matrix.placement_label(key[1]), key[2], LABELS.get(key[5], key[5]),
            " | ".join(values)))
    return lines + [""]


def host_time_table(summary):
    """Where the host's time per I/O went (tools/bench --host-profile), medians over the
    repetitions of every unthrottled cell: by QEMU thread and kind of code, and in all, with its
    ratio to stock's and its spread."""
    keys = [k for k in summary if kind_of(k) != "rate" and "host_us_per_io" in summary[k]]
    if not keys:
        return []
    lines = ["### Host time per I/O, µs (perf samples of QEMU's threads)", "",
             "| cell | configuration | " + " | ".join(h for _, h in hostprof.KINDS)
             + " | all (min–max) | spread | × stock |",
             "|---|---|" + "---:|" * (len(hostprof.KINDS) + 3)]
    for key in sorted(keys, key=cell_order):
        m = summary[key]
        t = m["host_us_per_io"]
        lines.append("| %s QD %d, %s, %d ctrl | %s | %s | %s (%s–%s) | %s | %s |" % (
            key[0], key[3], matrix.placement_label(key[1]), key[2], LABELS.get(key[5], key[5]),
            " | ".join(med(m, f, 1) for f, _ in hostprof.KINDS), fmt(t["median"], 1), fmt(t["min"], 1),
            fmt(t["max"], 1), spread(m, "host_us_per_io"), fmt(ratio(summary, key, "host_us_per_io"), 2)))
    return lines + [""]


def driver_functions(samples):
    """Per unthrottled cell, the driver's functions by instructions per I/O (median over the
    repetitions), each configuration side by side."""
    cells = {}
    for s in samples:
        if s.get("driver_functions") and not s.get("rate"):
            cells.setdefault(cell_key(s)[:-1], {}).setdefault(s["driver"], []).append(s["driver_functions"])
    lines = []
    for cell in sorted(cells):
        lines += ["### Driver instructions per I/O by function: %s QD %d, %s, %d ctrl"
                  % (cell[0], cell[3], matrix.placement_label(cell[1]), cell[2]), "",
                  "| configuration | function | instructions per I/O |", "|---|---|---:|"]
        for driver in sorted(cells[cell], key=driver_rank):
            reps = cells[cell][driver]
            names = {n for r in reps for n in r}
            medians = {n: statistics.median([r.get(n, 0.0) for r in reps]) for n in names}
            for name, v in sorted(medians.items(), key=lambda kv: -kv[1])[:10]:
                lines.append("| %s | `%s` | %.1f |" % (LABELS.get(driver, driver), name, v))
        lines.append("")
    return lines


def precision(summary):
    """(cells with repetitions, of those within SPREAD_TARGET for both IOPS and interrupts per I/O,
    the widest IOPS spread, the widest interrupt spread) over the unthrottled cells."""
    n = ok = 0
    worst_iops = worst_irq = 0.0
    for key, m in summary.items():
        if kind_of(key) == "rate" or m.get("iops", {}).get("spread") is None:
            continue
        n += 1
        si = m["iops"]["spread"]
        sq = m.get("interrupts_per_io", {}).get("spread") or 0.0
        worst_iops, worst_irq = max(worst_iops, si), max(worst_irq, sq)
        ok += si <= SPREAD_TARGET and sq <= SPREAD_TARGET
    return n, ok, worst_iops, worst_irq


def markdown(summary, samples=(), note=None):
    """The tables: per (workload, placement, controllers) the queue-depth sweep, the t/io_uring
    peak cell, and the equal-load latency cells; every configuration with its ratios to stock;
    with --insns, the instruction counts and the driver's functions; then the spread, and NOTE on
    where it comes from."""
    lines = []
    for group in groups(summary, "sweep"):
        lines += sweep_table(summary, group) + [""]
    for group in groups(summary, "peak"):
        lines += peak_table(summary, group) + [""]
    for group in groups(summary, "rate"):
        lines += rate_tables(summary, group)
    lines += insns_table(summary) + accounting_table(summary) + driver_functions(samples)
    lines += host_time_table(summary)
    n, ok, wi, wq = precision(summary)
    if n:
        lines += ["Spread (max/min − 1 over the repetitions): %d of %d cells within %d%% for both IOPS and "
                  "interrupts per I/O; widest %.1f%% (IOPS), %.1f%% (interrupts per I/O)."
                  % (ok, n, round(100 * SPREAD_TARGET), 100 * wi, 100 * wq), ""]
    if note:
        lines += [note, ""]
    return "\n".join(lines)


def comparison(runs):
    """One table across several runs of the same matrix (doorbell modes, device latencies): per
    unthrottled cell and configuration, IOPS and all interrupts per I/O as a ratio to stock in the
    same run, with the IOPS spread. RUNS: [(label, summary)]."""
    keys = set()
    for _, summary in runs:
        keys |= {k for k in summary if kind_of(k) != "rate" and k[5] != "stock"}
    head = "| cell | configuration | " + " | ".join("%s: IOPS × stock (spread) | all IRQ/IO × stock" % label
                                                   for label, _ in runs) + " |"
    lines = ["### Ratios to stock nvme, per run", "", head, "|---|---|" + "---:|---:|" * len(runs)]
    for key in sorted(keys, key=cell_order):
        cell = "%s QD %d, %s, %d ctrl" % (key[0], key[3], matrix.placement_label(key[1]), key[2])
        figures = []
        for _, summary in runs:
            m = summary.get(key, {})
            figures.append("%s (%s)" % (fmt(ratio(summary, key, "iops"), 2), spread(m, "iops")))
            figures.append(fmt(ratio(summary, key, "interrupts_per_io"), 2))
        lines.append("| %s | %s | %s |" % (cell, LABELS.get(key[5], key[5]), " | ".join(figures)))
    return "\n".join(lines) + "\n"


def load_env(f):
    """The environment recorded in a results.json."""
    return json.load(f)["environment"]


def public(sample):
    return {k: v for k, v in sample.items() if not k.startswith("_")}


def to_json(samples, summary, env, path):
    doc = {
        "environment": env,
        "samples": [public(s) for s in samples],
        "summary": [
            {
                "workload": k[0],
                "cpus": k[1],
                "jobs": matrix.jobs(k[1]),
                "ctrls": k[2],
                "qd": k[3],
                "rate": k[4],
                "driver": k[5],
                "figures": v,
                "iops_ratio_to_stock": ratio(summary, k, "iops"),
                "interrupts_ratio_to_stock": ratio(summary, k, "interrupts_per_io"),
            }
            for k, v in sorted(summary.items())
        ],
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)


def raw_name(s):
    """File name of a sample's raw tool output, unique in a run."""
    cell = "%s-qd%d-cpu%s-c%d-%s" % (s["workload"], s["qd"], (s.get("cpus") or "1").replace(",", "+"), s["ctrls"], s["driver"])
    if s.get("rate"):
        cell += "-load%d" % s["rate"]
    if s.get("tool") == "t-io_uring":
        return "io_uring-%s-rep%d.txt" % (cell, s["rep"])
    return "fio-%s-rep%d.json" % (cell, s["rep"])


def write_raw(samples, outdir):
    """Saves every run's raw output as its own file (fio's JSON as fio-plot and fio2gnuplot read
    it); returns how many."""
    n = 0
    for s in samples:
        if "_raw" in s:
            s["raw_file"] = raw_name(s)
            with open(os.path.join(outdir, s["raw_file"]), "w") as f:
                f.write(s["_raw"])
            n += 1
    return n


PLOTS = [
    # metric, title, log scale, dashed companion metric
    ("iops", "IOPS", False, None),
    ("irqs_per_io", "hard IRQs per I/O: device (solid), device + local timer (dashed)", False, "interrupts_per_io"),
    ("lat_p99_us", "p99 completion latency (µs)", True, None),
    ("cpu_us_per_io", "CPU µs per I/O", True, None),
]

PEAK_PLOTS = [("iops", "IOPS"), ("iops_per_core", "IOPS per CPU core"), ("interrupts_per_io", "all hard IRQs per I/O"),
              ("cpu_us_per_io", "CPU µs per I/O")]


def series(summary, group, driver, metric):
    """[(qd, {"median", "min", "max"})] of one driver's metric in a group's sweep."""
    return sorted((k[3], v[metric]) for k, v in summary.items()
                  if k[:3] == group and kind_of(k) == "sweep" and k[5] == driver and metric in v)


def plot_name(prefix, cpus, ctrls):
    """"randread-j1-c1" for the usual placements (one job on CPU 1, or one job per CPU), with the
    CPUs appended for the others ("randread-j1-c1-cpu0")."""
    jobs = matrix.jobs(cpus)
    usual = "1" if jobs == 1 else ",".join(str(c) for c in range(jobs))
    return "%s-j%d-c%d%s.png" % (prefix, jobs, ctrls, "" if cpus == usual else "-cpu" + cpus.replace(",", "+"))


def cdf_points(bins):
    """Latency histogram {ns: count} -> ([µs], [nines]) where nines is -log10(1 - F): 1 at the
    90th percentile, 2 at the 99th; the last bin, where F reaches 1, is left out."""
    total = sum(bins.values())
    xs, ys, seen = [], [], 0
    for ns in sorted(bins):
        seen += bins[ns]
        if seen >= total:
            break
        xs.append(ns / 1000.0)
        ys.append(-math.log10(1 - seen / total))
    return xs, ys


def pooled_bins(samples, key):
    out = {}
    for s in samples:
        if cell_key(s) == key:
            for ns, n in s.get("_bins", {}).items():
                out[ns] = out.get(ns, 0) + n
    return out


def plot(summary, outdir, samples=()):
    """One PNG per sweep group (four panels against queue depth, one line per driver), one per
    peak cell (bars per driver) and one latency CDF per equal-load queue depth (a panel per
    load). Returns the paths written (none if matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []
    for group in groups(summary, "sweep"):
        workload, cpus, ctrls = group
        fig, axes = plt.subplots(2, 2, figsize=(12, 8))
        qds = sorted({k[3] for k in summary if k[:3] == group and kind_of(k) == "sweep"})
        for ax, (metric, title, log, companion) in zip(axes.flat, PLOTS):
            for i, (driver, label) in enumerate(DRIVERS):
                color = "C%d" % i
                pts = series(summary, group, driver, metric)
                if not pts:
                    continue
                med_ = [p[1]["median"] for p in pts]
                err = [[p[1]["median"] - p[1]["min"] for p in pts], [p[1]["max"] - p[1]["median"] for p in pts]]
                ax.errorbar([p[0] for p in pts], med_, yerr=err, marker="o", capsize=3, color=color, label=label)
                extra = series(summary, group, driver, companion) if companion else []
                if extra:
                    ax.plot([p[0] for p in extra], [p[1]["median"] for p in extra], "--", marker=".", color=color)
            ax.set_xscale("log", base=2)
            ax.set_xticks(qds)
            ax.set_xticklabels([str(q) for q in qds])
            ax.minorticks_off()
            if log:
                ax.set_yscale("log")
            ax.set_xlabel("queue depth")
            ax.set_title(title, fontsize=10)
            ax.grid(True, alpha=0.3)
        axes.flat[0].legend(fontsize=8)
        fig.suptitle("%s: median and min–max of the repetitions" % group_title(*group))
        fig.tight_layout()
        path = os.path.join(outdir, plot_name(workload, cpus, ctrls))
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    for group in groups(summary, "peak"):
        workload, cpus, ctrls = group
        fig, axes = plt.subplots(2, 2, figsize=(12, 8))
        present = [(d, l) for d, l in DRIVERS if group + (matrix.PEAK_QD, 0, d) in summary]
        for ax, (metric, title) in zip(axes.flat, PEAK_PLOTS):
            for i, (driver, label) in enumerate(present):
                v = summary[group + (matrix.PEAK_QD, 0, driver)].get(metric)
                if v:
                    ax.bar(i, v["median"], yerr=[[v["median"] - v["min"]], [v["max"] - v["median"]]], capsize=4,
                           color="C%d" % [d for d, _ in DRIVERS].index(driver))
            ax.set_xticks(range(len(present)))
            ax.set_xticklabels([l.replace(", ", ",\n").replace(" poll", "\npoll") for _, l in present], fontsize=7)
            ax.set_title(title, fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
        fig.suptitle("peak (t/io_uring, QD %d), %s, %d controller(s): median and min–max"
                     % (matrix.PEAK_QD, matrix.placement_label(cpus), ctrls))
        fig.tight_layout()
        path = os.path.join(outdir, plot_name("peak", cpus, ctrls))
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    for group in groups(summary, "rate"):
        workload, cpus, ctrls = group
        for qd in sorted({k[3] for k in summary if k[:3] == group and kind_of(k) == "rate"}):
            rates = sorted({k[4] for k in summary if k[:4] == group + (qd,) and k[4]})
            fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 5), squeeze=False)
            drawn = False
            for ax, rate in zip(axes[0], rates):
                for i, (driver, label) in enumerate(DRIVERS):
                    xs, ys = cdf_points(pooled_bins(samples, group + (qd, rate, driver)))
                    if xs:
                        ax.plot(xs, ys, color="C%d" % i, label=label, drawstyle="steps-post")
                        drawn = True
                ax.set_xscale("log")
                ax.set_yticks([0, 1, 2, 3, 4])
                ax.set_yticklabels(["0", "90", "99", "99.9", "99.99"])
                ax.set_ylim(0, 4.5)
                ax.set_xlabel("completion latency (µs)")
                ax.set_ylabel("percentile")
                ax.set_title("%d%% of stock's IOPS at QD %d" % (rate, qd), fontsize=10)
                ax.grid(True, alpha=0.3, which="both")
            if not drawn:
                plt.close(fig)
                continue
            axes[0][0].legend(fontsize=8)
            fig.suptitle("Equal-load latency CDF, %s, QD %d (all repetitions pooled)" % (group_title(*group), qd))
            fig.tight_layout()
            path = os.path.join(outdir, plot_name("latency-cdf-qd%d" % qd, cpus, ctrls))
            fig.savefig(path, dpi=100)
            plt.close(fig)
            paths.append(path)
    return paths
