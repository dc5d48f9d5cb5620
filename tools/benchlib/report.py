"""Aggregates samples per cell (median and spread over repetitions), compares each driver with
the stock driver, and writes the JSON, the Markdown table and the plots."""

import json
import os
import statistics

from . import matrix

LABELS = {
    "stock": "nvme (interrupts)",
    "stock-poll": "nvme poll_queues + hipri",
    "adaptive-off": "nvme_adaptive, adaptive off",
    "adaptive-on": "nvme_adaptive, adaptive on",
}
# Drivers in the order tables and plots show them, with their labels.
DRIVERS = [(d, LABELS[d]) for d in matrix.DRIVERS]

# Figures aggregated per cell.
METRICS = [
    "iops",
    "lat_mean_us",
    "lat_p50_us",
    "lat_p99_us",
    "lat_p999_us",
    "irqs_per_io",
    "loc_per_io",
    "interrupts_per_io",
    "poll_timer_per_io",
    "cpu_us_per_io",
    "ctx_per_io",
    "polled_share",
    "fio_usr_cpu",
    "fio_sys_cpu",
]


def cell_key(s):
    return (s["workload"], s["jobs"], s["ctrls"], s["qd"], s["driver"])


def summarize(samples):
    """{cell key: {metric: {"median", "min", "max", "n"}}} over the repetitions of each cell."""
    cells = {}
    for s in samples:
        cells.setdefault(cell_key(s), []).append(s)
    out = {}
    for key, group in cells.items():
        m = {}
        for metric in METRICS:
            values = [s[metric] for s in group if s.get(metric) is not None]
            if values:
                m[metric] = {
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                    "n": len(values),
                }
        out[key] = m
    return out


def ratio(summary, key, metric, baseline="stock"):
    """median(metric) of the cell divided by the stock driver's in the same cell, or None."""
    base = summary.get(key[:4] + (baseline,), {}).get(metric)
    mine = summary.get(key, {}).get(metric)
    if not base or not mine or base["median"] == 0:
        return None
    return mine["median"] / base["median"]


def groups(summary):
    """The (workload, jobs, ctrls) groups present, in a stable order."""
    return sorted({k[:3] for k in summary})


def fmt(v, digits=0):
    if v is None:
        return "–"
    return "%.*f" % (digits, v)


def markdown(summary):
    """One table per (workload, jobs, controllers): every driver's figures and ratios to stock."""
    lines = []
    for workload, jobs, ctrls in groups(summary):
        lines.append("### %s, %d job%s, %d controller%s" % (workload, jobs, "s" if jobs > 1 else "", ctrls, "s" if ctrls > 1 else ""))
        lines.append("")
        lines.append(
            "| QD | driver | IOPS (min–max) | × stock | p50 µs | p99 µs | p99.9 µs | dev IRQ/IO | timer IRQ/IO | all IRQ/IO | × stock | CPU µs/IO | ctx/IO | polled |"
        )
        lines.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        qds = sorted({k[3] for k in summary if k[:3] == (workload, jobs, ctrls)})
        for qd in qds:
            for driver, label in DRIVERS:
                key = (workload, jobs, ctrls, qd, driver)
                m = summary.get(key)
                if not m:
                    continue

                def med(metric, digits=0):
                    return fmt(m[metric]["median"], digits) if metric in m else "–"

                iops = m["iops"]
                share = m.get("polled_share")
                lines.append(
                    "| %d | %s | %s (%s–%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"
                    % (
                        qd,
                        label,
                        fmt(iops["median"]),
                        fmt(iops["min"]),
                        fmt(iops["max"]),
                        fmt(ratio(summary, key, "iops"), 2),
                        med("lat_p50_us"),
                        med("lat_p99_us"),
                        med("lat_p999_us"),
                        med("irqs_per_io", 3),
                        med("loc_per_io", 3),
                        med("interrupts_per_io", 3),
                        fmt(ratio(summary, key, "interrupts_per_io"), 2),
                        med("cpu_us_per_io", 1),
                        med("ctx_per_io", 2),
                        "%d%%" % round(100 * share["median"]) if share else "–",
                    )
                )
        lines.append("")
    return "\n".join(lines)


def load_env(f):
    """The environment recorded in a results.json."""
    return json.load(f)["environment"]


def to_json(samples, summary, env, path):
    doc = {
        "environment": env,
        "samples": samples,
        "summary": [
            {
                "workload": k[0],
                "jobs": k[1],
                "ctrls": k[2],
                "qd": k[3],
                "driver": k[4],
                "figures": v,
                "iops_ratio_to_stock": ratio(summary, k, "iops"),
                "interrupts_ratio_to_stock": ratio(summary, k, "interrupts_per_io"),
            }
            for k, v in sorted(summary.items())
        ],
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)


PLOTS = [
    # metric, title, log scale, dashed companion metric
    ("iops", "IOPS", False, None),
    ("irqs_per_io", "hard IRQs per I/O: device (solid), device + local timer (dashed)", False, "interrupts_per_io"),
    ("lat_p99_us", "p99 completion latency (µs)", True, None),
    ("cpu_us_per_io", "CPU µs per I/O", True, None),
]


def series(summary, group, driver, metric):
    """[(qd, {"median", "min", "max"})] of one driver's metric in a (workload, jobs, ctrls) group."""
    return sorted((k[3], v[metric]) for k, v in summary.items() if k[:3] == group and k[4] == driver and metric in v)


def plot(summary, outdir):
    """One PNG per (workload, jobs, controllers): four panels against queue depth, one line per
    driver. Returns the paths written (none if matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []
    for group in groups(summary):
        workload, jobs, ctrls = group
        fig, axes = plt.subplots(2, 2, figsize=(12, 8))
        qds = sorted({k[3] for k in summary if k[:3] == group})
        for ax, (metric, title, log, companion) in zip(axes.flat, PLOTS):
            for i, (driver, label) in enumerate(DRIVERS):
                color = "C%d" % i
                pts = series(summary, group, driver, metric)
                if not pts:
                    continue
                med = [p[1]["median"] for p in pts]
                err = [[p[1]["median"] - p[1]["min"] for p in pts], [p[1]["max"] - p[1]["median"] for p in pts]]
                ax.errorbar([p[0] for p in pts], med, yerr=err, marker="o", capsize=3, color=color, label=label)
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
        fig.suptitle("%s, %d job(s), %d controller(s): median and min–max of the repetitions" % (workload, jobs, ctrls))
        fig.tight_layout()
        path = os.path.join(outdir, "%s-j%d-c%d.png" % (workload, jobs, ctrls))
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
