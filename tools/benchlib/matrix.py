"""The cells a benchmark runs, in the order it runs them.

Drivers are interleaved: every repetition of a group of cells (one workload, job placement and
controller count) runs each driver in turn, and the order of the drivers rotates from one
repetition to the next, so that drift in the host (or emulator) spreads over all of them.

A cell is (rep, driver, workload, qd, cpus, ctrls, runtime, rate):
- cpus: the job placement, CPU numbers joined by "," ("1": one job pinned to CPU 1; "0,1": two
  jobs, one pinned to each);
- rate: 0 for an unthrottled cell; otherwise the equal-load cell's offered load in percent of the
  stock driver's IOPS measured in this run's unthrottled cell of the same queue depth and
  placement (fio rate_iops, Poisson arrivals). Equal-load cells are random reads and run after
  every unthrottled cell, so that the reference exists.
"""

import collections

DRIVERS = ("stock", "stock-poll", "adaptive-poll", "adaptive-off", "adaptive-on")
# Configurations whose I/O is polled by the application (io_uring hipri on poll queues, one per
# job): t/io_uring runs them with -p1, the others with -p0.
POLLED = ("stock-poll", "adaptive-poll")
WORKLOADS = ("randread", "randwrite", "randrw70", "peak")
# Workloads that write to the device.
WRITES = ("randwrite", "randrw70")
RATE_WORKLOAD = "randread"

# The peak-IOPS cell (fio's t/io_uring, run as its authors do: batches of 32, registered files,
# fixed buffers) runs at this one queue depth.
PEAK_QD = 128

PRESETS = {
    "smoke": dict(workloads=("randread", "peak"), qds=(1, 16), placements=("1",), ctrls=(1,), reps=1, runtime=2,
                  rates=(), rate_qds=()),
    # Two boots (both doorbell modes) of about 9 minutes each.
    "quick": dict(workloads=("randread", "peak"), qds=(1, 32, 128), placements=("1",), ctrls=(1,), reps=3, runtime=3,
                  rates=(25, 50, 75), rate_qds=(32,), rate_reps=2),
    "full": dict(
        workloads=("randread", "randwrite", "randrw70", "peak"),
        qds=(1, 4, 16, 32, 64, 128),
        placements=("1", "0", "0,1"),
        ctrls=(1, 2),
        reps=3,
        runtime=10,
        rates=(25, 50, 75),
        rate_qds=(1, 32, 128),
    ),
}

Cell = collections.namedtuple("Cell", "rep driver workload qd cpus ctrls runtime rate")


def jobs(cpus):
    """Number of jobs of a placement: one per CPU."""
    return len(cpus.split(","))


def placement_label(cpus):
    n = jobs(cpus)
    return "1 job on CPU %s" % cpus if n == 1 else "%d jobs on CPUs %s" % (n, cpus.replace(",", "+"))


def cells(workloads, qds, placements, ctrls, reps, runtime, rates=(), rate_qds=(), rate_reps=None, drivers=DRIVERS):
    """[Cell] in run order: every unthrottled cell, then the equal-load cells (RATE_REPS
    repetitions, default REPS)."""
    out = []

    def rotated(rep):
        shift = (rep - 1) % len(drivers)
        return drivers[shift:] + drivers[:shift]

    for rep in range(1, reps + 1):
        for workload in workloads:
            for cpus in placements:
                for c in ctrls:
                    for driver in rotated(rep):
                        for qd in (PEAK_QD,) if workload == "peak" else qds:
                            out.append(Cell(rep, driver, workload, qd, cpus, c, runtime, 0))
    if rates and rate_qds:
        for rep in range(1, (rate_reps or reps) + 1):
            for cpus in placements:
                for c in ctrls:
                    for driver in rotated(rep):
                        for qd in rate_qds:
                            for rate in rates:
                                out.append(Cell(rep, driver, RATE_WORKLOAD, qd, cpus, c, runtime, rate))
    return out


def render(cell_list):
    """The matrix file bench-run reads: one "REP DRIVER WORKLOAD QD CPUS CTRLS RUNTIME RATE" line a cell."""
    return "".join("%d %s %s %d %s %d %d %d\n" % tuple(c) for c in cell_list)


def seconds(cell_list, switch_cost=3, per_cell_overhead=2):
    """Rough duration: the runs, their counter snapshots, and driver switches with warm-up."""
    switches = sum(1 for a, b in zip([None] + list(cell_list), cell_list)
                   if a is None or (a.driver, jobs(a.cpus)) != (b.driver, jobs(b.cpus)))
    return sum(c.runtime + per_cell_overhead for c in cell_list) + switches * switch_cost
