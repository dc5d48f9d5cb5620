"""The cells a benchmark runs, in the order it runs them.

Drivers are interleaved: every repetition of a group of cells (one workload, jobs and
controller count) runs each driver in turn, and the order of the drivers rotates from one
repetition to the next, so that drift in the host (or emulator) spreads over all of them.
"""

DRIVERS = ("stock", "stock-poll", "adaptive-off", "adaptive-on")
WORKLOADS = ("randread", "randwrite", "randrw70", "peak")

# The peak-IOPS workload (fio's t/io_uring style: batched submission and completion, registered
# files, fixed buffers) runs at this one queue depth.
PEAK_QD = 128

PRESETS = {
    "smoke": dict(workloads=("randread", "peak"), qds=(1, 16), jobs=(1,), ctrls=(1,), reps=1, runtime=2),
    "quick": dict(workloads=("randread", "peak"), qds=(1, 16, 32, 128), jobs=(1,), ctrls=(1,), reps=3, runtime=5),
    "full": dict(
        workloads=("randread", "randwrite", "randrw70", "peak"),
        qds=(1, 4, 16, 32, 64, 128),
        jobs=(1, 2),
        ctrls=(1, 2),
        reps=3,
        runtime=10,
    ),
}


def cells(workloads, qds, jobs, ctrls, reps, runtime, drivers=DRIVERS):
    """[(rep, driver, workload, qd, jobs, ctrls, runtime)] in run order."""
    out = []
    for rep in range(1, reps + 1):
        for workload in workloads:
            for j in jobs:
                for c in ctrls:
                    shift = (rep - 1) % len(drivers)
                    for driver in drivers[shift:] + drivers[:shift]:
                        for qd in (PEAK_QD,) if workload == "peak" else qds:
                            out.append((rep, driver, workload, qd, j, c, runtime))
    return out


def render(cell_list):
    return "".join("%d %s %s %d %d %d %d\n" % c for c in cell_list)


def seconds(cell_list, switch_cost=8, per_cell_overhead=2):
    """Rough duration: the runs, their counter snapshots, and driver switches with warm-up."""
    switches = sum(1 for a, b in zip([None] + cell_list, cell_list) if a is None or a[1] != b[1])
    return sum(c[6] + per_cell_overhead for c in cell_list) + switches * switch_cost
