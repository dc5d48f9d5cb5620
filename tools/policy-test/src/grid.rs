//! Evaluation of the defaults over the device latencies, queue depths and workloads a user may
//! have, on three hosts (a PCIe 4 server, the prior art's PCIe 5 device, the emulator): in each
//! cell a grid search over parameter sets finds the set with the fewest interrupts per I/O that
//! meets the cell's bound, and the defaults are held to the product's promises:
//!
//! - a closed loop (a fixed depth: steady, ramping) keeps at least [`KEEP_IOPS`] of the IOPS
//!   interrupts alone give; where interrupts alone keep the CPU at least [`CPU_BOUND`] busy
//!   and continuous polling could gain at least [`GAIN_CEILING`], the interrupts polling saves
//!   show up as at least [`GAIN_IOPS`] of their IOPS;
//! - an open loop (arrivals at a given rate: sparse, bursty, on/off) sees at most
//!   [`ADDED_PERCENT`] of the device latency added to its mean latency;
//! - the defaults never take more than [`PROBE_PERCENT`] more interrupts per I/O than interrupts
//!   alone, and over the grid at most [`WITHIN_PERCENT`] more than the best candidate set that
//!   keeps the first two promises in at least [`NEAR_BEST_SHARE`] of the cells (no fixed set
//!   that is about as safe takes clearly fewer interrupts). Each cell's line also compares the
//!   defaults with the set that takes the fewest interrupts in that cell alone.
//!
//! The table lands in `target/model-grid.txt` (`cargo test grid -- --nocapture` also prints it);
//! design.rst quotes it.

use crate::model::{
    polled_ceiling,
    run_settled,
    Costs,
    Drive,
    Model,
    Outcome,
    Phase,
    MS,
    US, //
};
use crate::policy::*;
use std::fmt::Write as _;

const LATENCIES: [u64; 6] = [5 * US, 20 * US, 100 * US, 500 * US, MS, 5 * MS];
const DEPTHS: [u32; 5] = [1, 4, 16, 32, 128];

/// Completions a cell aims at.
const COMPLETIONS: u64 = 15_000;
fn completions() -> u64 {
    std::env::var("COMPLETIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(COMPLETIONS)
}

/// A closed loop keeps this share of interrupts alone's IOPS.
const KEEP_IOPS: f64 = 0.97;

/// Where interrupts alone keep the CPU this busy, the CPU sets the pace ...
const CPU_BOUND: f64 = 0.90;

/// ... and polling must turn the interrupts it saves into this much more IOPS ...
const GAIN_IOPS: f64 = 1.10;

/// ... wherever continuous polling at the best fixed wait (`polled_ceiling`) gains at least
/// this much: the defaults must capture at least two fifths of the gain there is. Continuous polling
/// knows its best wait beforehand; the policy pays to find it (a probe, its confirmation, the
/// climb). Where even that gains little, the timer's lateness is longer than the loop's round
/// (the emulator at QD 4 to 32), or the interrupts already come batched.
const GAIN_CEILING: f64 = 1.25;

/// An open loop's mean latency grows by at most this share of the device latency.
const ADDED_PERCENT: u64 = 10;

/// How much worse than the best set the defaults may be, in mean interrupts per I/O ...
const WITHIN_PERCENT: f64 = 5.0;

/// ... among the sets that keep the promises in at least this share of the cells.
const NEAR_BEST_SHARE: f64 = 0.95;

/// What the defaults may spend over interrupts alone, in interrupts per I/O: an episode that
/// turns out not to pay costs a mask, a poll or two and an unmask before the backoff.
const PROBE_PERCENT: f64 = 1.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    Steady,
    Ramping,
    Sparse,
    Bursty,
    OnOff,
}

const LOADS: [Load; 5] = [
    Load::Steady,
    Load::Ramping,
    Load::Sparse,
    Load::Bursty,
    Load::OnOff,
];

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::Steady => "steady",
            Load::Ramping => "ramping",
            Load::Sparse => "sparse",
            Load::Bursty => "bursty",
            Load::OnOff => "on/off",
        }
    }

    /// A closed loop (fixed depth: judged by its IOPS) or an open one (arrivals at a given
    /// rate: judged by the latency polling adds).
    fn closed(self) -> bool {
        matches!(self, Load::Steady | Load::Ramping)
    }

    /// The workload's phases for a device of `latency` at depth `qd`, long enough for about
    /// [`COMPLETIONS`] completions.
    fn phases(self, latency: u64, qd: u32, costs: &Costs) -> Vec<Phase> {
        // A completion every `per` at full depth: the device's limit, or the CPU's where
        // interrupts that reap one completion each would saturate it.
        let per = |qd: u32| (latency / u64::from(qd)).max(costs.per_interrupted_io());
        let mut phases = Vec::new();
        let mut t = 0;
        let mut push = |t: &mut u64, len: u64, drive: Drive| {
            *t += len;
            phases.push(Phase { until: *t, drive });
        };
        match self {
            Load::Steady => push(&mut t, completions() * per(qd), Drive::Closed { qd }),
            Load::Ramping => {
                let steps: Vec<u32> = (0..8).map(|i| 1 << i).filter(|&d| d <= qd).collect();
                for &d in &steps {
                    let len = completions() / steps.len() as u64 * per(d);
                    push(&mut t, len, Drive::Closed { qd: d });
                }
            }
            Load::Sparse => {
                // A tenth of what the depth carries, arriving independently.
                let gap = 10 * per(qd);
                push(
                    &mut t,
                    completions() / 2 * gap,
                    Drive::Open { gap, cap: qd },
                );
            }
            Load::Bursty => {
                // qd at once, every three times what a burst takes.
                let period = 3 * latency.max(per(qd) * u64::from(qd));
                let cycles = (completions() / u64::from(qd)).max(8);
                push(&mut t, cycles * period, Drive::Bursts { qd, period });
            }
            Load::OnOff => {
                // Spells of 64 latencies at half the rate the depth carries, then as long idle.
                let spell = 64 * latency.max(per(qd) * u64::from(qd));
                let gap = 2 * per(qd);
                let cycles = (completions() * gap / spell).max(4);
                for _ in 0..cycles {
                    push(&mut t, spell, Drive::Open { gap, cap: qd });
                    push(&mut t, spell, Drive::Idle);
                }
            }
        }
        phases
    }
}

/// The parameter sets searched: every combination of these, and adaptive polling off.
fn candidates() -> Vec<Params> {
    let d = crate::defaults();
    let mut sets = vec![Params {
        enabled: false,
        ..d
    }];
    for sample_size in [16, 64, 256] {
        for target_batch in [4, 16, 64, 256] {
            for max_delay_us in [20, 100, 1_000, 10_000] {
                for budget_percent in [5, 10, 25] {
                    sets.push(Params {
                        sample_size,
                        target_batch,
                        max_delay_ns: max_delay_us * US,
                        budget_percent,
                        ..d
                    });
                }
            }
        }
    }
    if !sets.contains(&d) {
        sets.push(d);
    }
    sets
}

struct Cell {
    costs: Costs,
    latency: u64,
    qd: u32,
    load: Load,
}

impl Cell {
    fn name(&self) -> String {
        format!(
            "{:8} {:>5}us QD{:<3} {:7}",
            self.costs.name,
            self.latency / US,
            self.qd,
            self.load.name()
        )
    }

    /// Whether `o` keeps the cell's promise against interrupts alone (`plain`): the IOPS of a
    /// closed loop (and the gain, where the cell must show one), the latency of an open one.
    fn meets_bound(&self, o: &Outcome, plain: &Outcome, gain: bool) -> bool {
        if self.load.closed() {
            o.iops_ratio(plain) >= if gain { GAIN_IOPS } else { KEEP_IOPS }
        } else {
            o.added_latency_ns(plain) <= (self.latency * ADDED_PERCENT / 100) as f64
        }
    }
}

struct Verdict {
    line: String,
    failures: Vec<String>,
    near_best: bool,
    /// For each candidate set, whether it keeps the cell's promises, and its interrupts per
    /// I/O.
    sets: Vec<(bool, f64)>,
    /// Interrupts alone kept the CPU busy in a closed loop: the gain applies.
    cpu_bound: bool,
    /// The defaults' interrupts per I/O, and interrupts alone's.
    interrupts: (f64, f64),
    /// The cell's host profile and load, for the summary.
    profile: &'static str,
    load: Load,
    /// The defaults' IOPS against interrupts alone's, and the latency they added in percent of
    /// the device's.
    iops: f64,
    added_percent: f64,
    /// Where the gain applies, the best fixed wait's IOPS against interrupts alone's.
    gain_ceiling: Option<f64>,
}

fn evaluate(cell: &Cell, sets: &[Params]) -> Verdict {
    let phases = cell.load.phases(cell.latency, cell.qd, &cell.costs);
    let outcomes: Vec<Outcome> = sets
        .iter()
        .map(|&p| run_settled(p, cell.costs, cell.latency, &phases))
        .collect();
    // The first set is adaptive polling off: plain interrupts.
    let plain = &outcomes[0];
    // A steady closed loop: a ramp's steps are shorter than the backoff of a probe that found
    // no gain at a shallower step (64 times the probe's length).
    let cpu_bound = cell.load == Load::Steady && plain.cpu_busy() >= CPU_BOUND;
    let ceiling = if cpu_bound {
        polled_ceiling(cell.costs, cell.latency, &phases, plain)
    } else {
        0.0
    };
    let gain = ceiling >= GAIN_CEILING;
    // The fewest interrupts among the sets that keep the cell's promises (throughput first:
    // where the cell must show a gain, a set that does not is no better for fewer interrupts),
    // adaptive polling off if none does.
    let best = outcomes
        .iter()
        .enumerate()
        .filter(|(i, o)| *i == 0 || cell.meets_bound(o, plain, gain))
        .min_by(|(_, a), (_, b)| a.interrupts_per_io().total_cmp(&b.interrupts_per_io()))
        .map(|(i, _)| i)
        .expect("adaptive off is a candidate");
    let d = crate::defaults();
    let di = sets.iter().position(|p| *p == d).unwrap();
    let (def, top) = (&outcomes[di], &outcomes[best]);
    let near_best =
        def.interrupts_per_io() <= top.interrupts_per_io() * (1.0 + WITHIN_PERCENT / 100.0);
    // The most IOPS any set reached: what polling can buy in this cell at all.
    let most_iops = outcomes
        .iter()
        .map(|o| o.iops_ratio(plain))
        .fold(0.0, f64::max);
    let name = cell.name();
    let line = format!(
        "{name} | defaults {:.3} int/IO ({:3.0}% polled, IOPS x{:.3}, {:+7.1}us) | best {:.3} \
         int/IO (IOPS x{:.3}, {:+7.1}us: {}) | alone {:.3} int/IO, CPU {:3.0}% | most IOPS x{:.3} (polled x{:.3}){}{}",
        def.interrupts_per_io(),
        100.0 * def.poll_share(),
        def.iops_ratio(plain),
        def.added_latency_ns(plain) / 1e3,
        top.interrupts_per_io(),
        top.iops_ratio(plain),
        top.added_latency_ns(plain) / 1e3,
        describe(&sets[best]),
        plain.interrupts_per_io(),
        100.0 * plain.cpu_busy(),
        most_iops,
        ceiling,
        if cpu_bound { " (CPU-bound)" } else { "" },
        if near_best { "" } else { " | not within 5%" },
    );
    let mut failures = Vec::new();
    if !cell.meets_bound(def, plain, false) {
        failures.push(if cell.load.closed() {
            format!(
                "{name}: IOPS x{:.3} of interrupts alone",
                def.iops_ratio(plain)
            )
        } else {
            format!(
                "{name}: adds {:.1}us, over {ADDED_PERCENT}% of the device latency",
                def.added_latency_ns(plain) / 1e3
            )
        });
    }
    if gain && def.iops_ratio(plain) < GAIN_IOPS {
        failures.push(format!(
            "{name}: CPU-bound on interrupts ({:.0}% busy), IOPS only x{:.3} (polled ceiling \
             x{ceiling:.3})",
            100.0 * plain.cpu_busy(),
            def.iops_ratio(plain)
        ));
    }
    if def.interrupts_per_io() > plain.interrupts_per_io() * (1.0 + PROBE_PERCENT / 100.0) {
        failures.push(format!(
            "{name}: {:.3} interrupts per I/O, interrupts alone {:.3}",
            def.interrupts_per_io(),
            plain.interrupts_per_io()
        ));
    }
    let sets = outcomes
        .iter()
        .map(|o| (cell.meets_bound(o, plain, false), o.interrupts_per_io()))
        .collect();
    Verdict {
        line,
        failures,
        near_best,
        sets,
        cpu_bound,
        interrupts: (def.interrupts_per_io(), plain.interrupts_per_io()),
        profile: cell.costs.name,
        load: cell.load,
        iops: def.iops_ratio(plain),
        added_percent: 100.0 * def.added_latency_ns(plain) / cell.latency as f64,
        gain_ceiling: gain.then_some(ceiling),
    }
}

/// One line per host profile and load over its 30 cells: the mean interrupts per I/O of the
/// defaults and of interrupts alone; for closed loops the least IOPS against interrupts alone;
/// for open ones the most latency added, in percent of the device's; and where the gain
/// applies, the least IOPS gain and the best fixed wait's in that cell.
fn summary(verdicts: &[Verdict]) -> String {
    let mut out = String::from(
        "profile   load     int/IO defaults (alone)  least IOPS  most added  gain cells: least \
         gain (ceiling)\n",
    );
    for profile in ["hardware", "fast", "emulator"] {
        for load in LOADS {
            let cells: Vec<&Verdict> = verdicts
                .iter()
                .filter(|v| v.profile == profile && v.load == load)
                .collect();
            let n = cells.len().max(1) as f64;
            let mean = |f: fn(&Verdict) -> f64| cells.iter().map(|v| f(v)).sum::<f64>() / n;
            let closed = if load.closed() {
                let least = cells.iter().map(|v| v.iops).fold(f64::MAX, f64::min);
                format!("x{least:.3}")
            } else {
                "-".into()
            };
            let open = if load.closed() {
                "-".into()
            } else {
                let most = cells
                    .iter()
                    .map(|v| v.added_percent)
                    .fold(f64::MIN, f64::max);
                format!("{most:.1} %")
            };
            let gains: Vec<(f64, f64)> = cells
                .iter()
                .filter_map(|v| v.gain_ceiling.map(|c| (v.iops, c)))
                .collect();
            let gain = match gains.iter().min_by(|a, b| a.0.total_cmp(&b.0)) {
                Some((iops, ceiling)) => format!("{}: x{iops:.3} (x{ceiling:.3})", gains.len()),
                None => "-".into(),
            };
            writeln!(
                out,
                "{profile:<9} {:<8} {:>8.3} ({:.3})      {closed:>10}  {open:>10}  {gain}",
                load.name(),
                mean(|v| v.interrupts.0),
                mean(|v| v.interrupts.1),
            )
            .unwrap();
        }
    }
    out
}

fn describe(p: &Params) -> String {
    if !p.enabled {
        return "off".into();
    }
    format!(
        "sample {} batch {} delay {}us budget {}%",
        p.sample_size,
        p.target_batch,
        p.max_delay_ns / US,
        p.budget_percent
    )
}

/// Every cell of the grid.
fn cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for costs in [Costs::hardware(), Costs::fast(), Costs::emulator()] {
        for latency in LATENCIES {
            for qd in DEPTHS {
                for load in LOADS {
                    cells.push(Cell {
                        costs,
                        latency,
                        qd,
                        load,
                    });
                }
            }
        }
    }
    cells
}

#[test]
fn defaults_keep_iops_bound_latency_and_save_interrupts_in_every_cell() {
    let sets = candidates();
    let cells = cells();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = cells.len().div_ceil(threads);
    let verdicts: Vec<Verdict> = std::thread::scope(|s| {
        let handles: Vec<_> = cells
            .chunks(chunk)
            .map(|part| s.spawn(|| part.iter().map(|c| evaluate(c, &sets)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut table = String::new();
    for v in &verdicts {
        writeln!(table, "{}", v.line).unwrap();
    }
    let n = verdicts.len();
    let near = verdicts.iter().filter(|v| v.near_best).count();
    let cpu_bound = verdicts.iter().filter(|v| v.cpu_bound).count();
    let alone = verdicts.iter().map(|v| v.interrupts.1).sum::<f64>() / n as f64;
    // Each set over the whole grid: the cells where it keeps the promises, its mean
    // interrupts per I/O. The best set keeps them in at least NEAR_BEST_SHARE of the cells.
    let grid: Vec<(usize, f64)> = (0..sets.len())
        .map(|i| {
            let kept = verdicts.iter().filter(|v| v.sets[i].0).count();
            let mean = verdicts.iter().map(|v| v.sets[i].1).sum::<f64>() / n as f64;
            (kept, mean)
        })
        .collect();
    let needed = (NEAR_BEST_SHARE * n as f64).ceil() as usize;
    let (best, &(best_kept, best_mean)) = grid
        .iter()
        .enumerate()
        .filter(|(_, (kept, _))| *kept >= needed)
        .min_by(|(_, a), (_, b)| a.1.total_cmp(&b.1))
        .expect("adaptive off keeps every promise");
    let d = crate::defaults();
    let di = sets.iter().position(|p| *p == d).unwrap();
    let (def_kept, def_mean) = grid[di];
    writeln!(
        table,
        "mean interrupts per I/O over the {n} cells: defaults {def_mean:.4} (promises kept in \
         {def_kept}), interrupts alone {alone:.4}; the best set keeping them in at least \
         {needed}: {} {best_mean:.4} (kept in {best_kept}); {cpu_bound} cells CPU-bound on \
         interrupts; defaults within {WITHIN_PERCENT}% of each cell's best in {near}",
        describe(&sets[best]),
    )
    .unwrap();
    table.push_str(&summary(&verdicts));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/target/model-grid.txt");
    std::fs::write(path, &table).unwrap();
    println!("{table}");
    let mut failures: Vec<&String> = verdicts.iter().flat_map(|v| &v.failures).collect();
    let short = format!(
        "defaults take {def_mean:.4} interrupts per I/O over the grid, more than \
         {WITHIN_PERCENT}% above the best set's {best_mean:.4} ({})",
        describe(&sets[best])
    );
    if def_mean > best_mean * (1.0 + WITHIN_PERCENT / 100.0) {
        failures.push(&short);
    }
    assert!(
        cpu_bound > 0,
        "no CPU-bound cell: the gain is never evaluated"
    );
    assert!(
        failures.is_empty(),
        "{} failures over {} cells:\n{}",
        failures.len(),
        verdicts.len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The cell `CELL=profile,latency_us,qd,load` names, its phases, when they end, and the run on
/// interrupts alone, for the two ignored tests below.
fn cell_from_env() -> (Costs, u64, Vec<Phase>, u64, Outcome) {
    let spec = std::env::var("CELL").expect("CELL=profile,latency_us,qd,load");
    let f: Vec<&str> = spec.split(',').collect();
    let costs = [Costs::hardware(), Costs::fast(), Costs::emulator()]
        .into_iter()
        .find(|c| c.name == f[0])
        .unwrap();
    let latency = f[1].parse::<u64>().unwrap() * US;
    let qd = f[2].parse().unwrap();
    let load = LOADS.into_iter().find(|l| l.name() == f[3]).unwrap();
    let phases = load.phases(latency, qd, &costs);
    let end = phases.last().unwrap().until;
    let plain = run_settled(
        Params {
            enabled: false,
            ..crate::defaults()
        },
        costs,
        latency,
        &phases,
    );
    (costs, latency, phases, end, plain)
}

/// Prints one cell's decisions: `CELL=hardware,5,16,steady cargo test --release trace_cell --
/// --ignored --nocapture` (device latency in microseconds).
#[test]
#[ignore]
fn trace_cell() {
    let (costs, latency, phases, end, plain) = cell_from_env();
    let o = Model::new(crate::defaults(), costs, latency, phases.clone())
        .traced()
        .run(end + 100 * latency + 100 * MS)
        .settled();
    println!(
        "irqs {} (empty {}) timers {} completions {} episodes {}; alone: irqs {} (empty {}) completions {}",
        o.irqs, o.empty_irqs, o.timer_expiries, o.completions, o.episodes, plain.irqs, plain.empty_irqs, plain.completions
    );
    println!(
        "IOPS x{:.3}, {:.3} int/IO (alone {:.3}), added {:.1}us, CPU {:.0}% (alone {:.0}%), polled ceiling x{:.3}",
        o.iops_ratio(&plain),
        o.interrupts_per_io(),
        plain.interrupts_per_io(),
        o.added_latency_ns(&plain) / 1e3,
        100.0 * o.cpu_busy(),
        100.0 * plain.cpu_busy(),
        polled_ceiling(costs, latency, &phases, &plain)
    );
}

/// Prints a cell's IOPS and interrupts at fixed waits from 1 us up (`CELL` as for
/// [`trace_cell`]): where the polled ceiling comes from.
#[test]
#[ignore]
fn ceiling_curve() {
    let (costs, latency, phases, end, plain) = cell_from_env();
    let mut wait = US;
    while wait <= 4 * latency.max(costs.slack_ns) {
        let o = Model::new(crate::defaults(), costs, latency, phases.clone())
            .with_fixed_wait(wait)
            .run(end + 100 * latency + 100 * MS)
            .settled_oracle();
        println!("wait {:>8}ns IOPS x{:.3} int/IO {:.3} per poll {:.1} lat {:.1}us (alone {:.1}) cpu {:.0}%",
            wait, o.iops_ratio(&plain), o.interrupts_per_io(), o.reaped_by_poll as f64 / o.timer_expiries.max(1) as f64,
            o.mean_latency_ns()/1e3, plain.mean_latency_ns()/1e3, 100.0*o.cpu_busy());
        wait += wait / 4;
    }
}
